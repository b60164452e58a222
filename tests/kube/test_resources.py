"""apply/delete of the shared manifests on Kubernetes, kubectl style (created, unchanged,
configured), and one-line errors for what the cluster refuses or does not have."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.cluster import InvalidResource, NotFound
from backend.models import parse_manifests
from tests.kube.objects import TRAINJOBS

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"


def load(name: str):
    return parse_manifests((MANIFESTS / name).read_text(), name)


async def test_apply_is_idempotent_and_updates_what_changed(api, cluster):
    resources = load("runtime.yaml") + load("volume.yaml") + load("trainjob.yaml") + load(
        "snapshots/volumesnapshot.yaml")
    assert [await cluster.apply(r) for r in resources] == [
        "trainingruntime/kfcockpit-torch created", "persistentvolumeclaim/checkpoints created",
        "trainjob/lesson-ddp created", "volumesnapshot/after-run-1 created"]
    (sent,) = api.requests_for("POST", "/trainjobs")
    assert sent.body["spec"] == resources[2].to_manifest()["spec"]  # sent as declared; the server adds its defaults
    assert api.get(TRAINJOBS, "lesson-ddp")["spec"]["trainer"] == sent.body["spec"]["trainer"]
    assert [await cluster.apply(r) for r in resources] == [
        "trainingruntime/kfcockpit-torch unchanged", "persistentvolumeclaim/checkpoints unchanged",
        "trainjob/lesson-ddp unchanged", "volumesnapshot/after-run-1 unchanged"]

    job = resources[2]  # spec.trainer is immutable (the Trainer v2.3.0 CRD's CEL rule): suspend is not
    job.spec.suspend = True
    assert await cluster.apply(job) == "trainjob/lesson-ddp configured"
    assert api.get(TRAINJOBS, "lesson-ddp")["spec"]["suspend"] is True
    (patch,) = api.requests_for("PATCH", "/trainjobs/lesson-ddp")
    assert patch.body["spec"]["suspend"] is True

    await cluster.delete("TrainJob", "lesson-ddp")
    assert api.get(TRAINJOBS, "lesson-ddp") is None
    with pytest.raises(NotFound, match="TrainJob lesson-ddp: not found in namespace default"):
        await cluster.delete("TrainJob", "lesson-ddp")


async def test_a_manifest_for_another_namespace_is_refused(cluster):
    (job,) = load("trainjob.yaml")
    job.metadata.namespace = "team-a"
    with pytest.raises(InvalidResource, match="declares namespace 'team-a'.*--namespace team-a"):
        await cluster.apply(job)


async def test_a_cluster_without_the_trainer_says_how_to_install_it(api, cluster):
    api.unserve(TRAINJOBS)
    (job,) = load("trainjob.yaml")
    with pytest.raises(NotFound) as failure:
        await cluster.apply(job)
    assert str(failure.value) == ("the cluster has no trainjobs.trainer.kubeflow.org: Kubeflow Trainer is "
                                  "not installed: manifests/install/install.sh trainer")
    with pytest.raises(NotFound, match="Kubeflow Trainer is not installed"):
        async for _ in cluster.watch_jobs():
            pass
