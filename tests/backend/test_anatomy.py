"""The anatomy's rules on the lesson's own TrainJob and runtime (manifests/), each piece of rank
1's pod attributed as upstream puts it there; the cited function is named in each test."""

from __future__ import annotations

from backend.anatomy.build import anatomy_of
from backend.anatomy.patches import patch_diffs
from backend.anatomy.provenance import TORCH_ENV
from tests.backend.anatomy_objects import lesson_objects, manifest, pod

MANAGER = "kfcockpit.io/lesson"  # manifests/trainjob.yaml's runtimePatches[0].manager


def by(anatomy, kind: str) -> dict[str, str]:
    return {p.name: p.source.by for p in anatomy.pieces if p.kind == kind}


def test_rank_1s_pet_variables_are_the_torch_plugins():
    # kubeflow/trainer v2.3.0 pkg/runtime/framework/plugins/torch/torch.go Torch.EnforceMLPolicy:
    # petEnvs (PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK) and masterEnvVars (PET_MASTER_ADDR
    # `<job>-node-0-0.<job>`, PET_MASTER_PORT 29500) upserted into the trainer's `node` container.
    anatomy = anatomy_of(lesson_objects())
    assert anatomy.rank == 1 and anatomy.pod == "lesson-ddp-node-0-1-ab1cd"
    env = by(anatomy, "env")
    assert {name: env[name] for name in TORCH_ENV} == {name: "torch plugin" for name in TORCH_ENV}
    master = next(p for p in anatomy.pieces if p.name == "PET_MASTER_ADDR")
    assert master.value == "lesson-ddp-node-0-0.lesson-ddp" and "Torch.EnforceMLPolicy" in master.source.code
    # The runtime's own PET_RDZV_CONF is the runtime's (manifests/runtime.yaml), not the plugin's.
    assert env["PET_RDZV_CONF"] == env["OMP_NUM_THREADS"] == "TrainingRuntime kfcockpit-torch"
    # kubernetes pkg/controller/job indexed_job_utils.go addCompletionIndexEnvVariables
    assert env["JOB_COMPLETION_INDEX"] == "Job controller"


def test_the_volume_and_mount_are_the_patch_managers():
    # kubeflow/trainer v2.3.0 pkg/runtime/core/trainingruntime.go TrainingRuntime.mergeRuntimePatches
    anatomy = anatomy_of(lesson_objects())
    assert by(anatomy, "volume") == {"checkpoints": MANAGER, "kube-api-access-x1": "ServiceAccount admission"}
    assert by(anatomy, "mount")["/checkpoints"] == MANAGER
    volume = next(p for p in anatomy.pieces if p.kind == "volume" and p.name == "checkpoints")
    assert volume.value == "claim checkpoints" and "mergeRuntimePatches" in volume.source.code


def test_node_devices_dns_and_labels():
    anatomy = anatomy_of(lesson_objects())
    node = next(p for p in anatomy.pieces if p.kind == "node")
    assert (node.value, node.source.by) == ("kfcockpit-worker2", "scheduler")
    assert by(anatomy, "device") == {"devices": "device plugin"}
    network = {p.name: (p.value, p.source) for p in anatomy.pieces if p.kind == "network"}
    # kubernetes-sigs/jobset v0.12.0 pkg/controllers/jobset_controller.go constructJob / GetSubdomain
    # and createHeadlessSvcIfNecessary; the hostname is the Indexed Job's (job_controller.go)
    assert network["subdomain"][0] == "lesson-ddp" and "GetSubdomain" in network["subdomain"][1].code
    assert network["DNS name"][0] == "lesson-ddp-node-0-1.lesson-ddp.default.svc"
    assert "createHeadlessSvcIfNecessary" in network["headless Service"][1].code
    assert network["hostname"][1].by == "Job controller"
    labels, annotations = by(anatomy, "label"), by(anatomy, "annotation")
    # jobset_controller.go labelAndAnnotateObject; pkg/registry/batch/job/strategy.go generateSelector
    assert labels["jobset.sigs.k8s.io/restart-attempt"] == "JobSet controller"
    assert labels["job-name"] == "Job API" and labels["batch.kubernetes.io/job-completion-index"] == "Job controller"
    assert annotations["kueue.x-k8s.io/safe-to-forcefully-delete"] == "TrainingRuntime kfcockpit-torch"
    ports = {p.name: p.source.by for p in anatomy.pieces if p.kind == "port"}
    assert ports == {"29500": "torch plugin"}


def test_the_runtime_diff_is_what_the_patch_added():
    (diff,) = patch_diffs(manifest("runtime.yaml"), manifest("trainjob.yaml")["spec"]["runtimePatches"])
    assert diff.manager == MANAGER
    changes = {c.path: (c.before, c.after) for c in diff.changes}
    assert changes == {
        "replicatedJobs[node] pod.volumes": (None, '[{"name":"checkpoints","persistentVolumeClaim":'
                                                   '{"claimName":"checkpoints"}}]'),
        "replicatedJobs[node] pod.containers[node].volumeMounts": (
            None, '[{"mountPath":"/checkpoints","name":"checkpoints"}]'),
    }


def test_a_patch_over_an_existing_field_shows_before_and_after():
    runtime = manifest("runtime.yaml")
    patches = [{"manager": "example.com/a", "trainingRuntimeSpec": {"template": {"spec": {
        "failurePolicy": {"maxRestarts": 5},
        "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": {"containers": [
            {"name": "node", "env": [{"name": "OMP_NUM_THREADS", "value": "2"}]}]}}}}}]}}}},
        {"manager": "example.com/b",
         "trainingRuntimeSpec": {"template": {"spec": {"failurePolicy": {"maxRestarts": 7}}}}}]
    first, second = patch_diffs(runtime, patches)
    assert {(c.path, c.before, c.after) for c in first.changes} == {
        ("failurePolicy.maxRestarts", "3", "5"),
        ("replicatedJobs[node] pod.containers[node].env[OMP_NUM_THREADS].value", "1", "2")}
    # the second patch is applied over the first, as mergeRuntimePatches does in order
    assert [(c.path, c.before, c.after) for c in second.changes] == [("failurePolicy.maxRestarts", "5", "7")]


def test_the_chain_and_the_restart_budget():
    anatomy = anatomy_of(lesson_objects())
    titles = [s.title for s in anatomy.sections]
    assert titles == ["TrainJob lesson-ddp", "TrainingRuntime kfcockpit-torch", "JobSet lesson-ddp", "Jobs", "pods"]
    jobset = {r.name: (r.value, r.note) for r in anatomy.sections[2].rows}
    assert jobset["failurePolicy"][0] == "maxRestarts 3"
    assert jobset["restarts"] == ("0 used, 0 of 3 counted", "3 left")


def test_a_job_of_one_node_takes_rank_0_apart_and_says_so():
    anatomy = anatomy_of(lesson_objects(pods=(pod(0),)))
    assert anatomy.rank == 0 and "no pod of rank 1" in anatomy.notes[0]


def test_the_newest_attempts_pod_is_taken_apart():
    anatomy = anatomy_of(lesson_objects(pods=(pod(1, attempt=0, node="a"), pod(1, attempt=1, node="b"))))
    assert next(p.value for p in anatomy.pieces if p.kind == "node") == "b"
