"""explain through the real `kubernetes` client, the objects put in the API server as the
controllers leave them (tests/kube/apiserver.py): the same objects give the same anatomy, the
JobSet's headless Service is read where the cluster serves Services, and nothing is written."""

from __future__ import annotations

import pytest

from backend.cluster import NotFound
from tests.backend.anatomy_objects import JOB, lesson_objects



async def test_explain_reads_the_chain_and_the_headless_service(api, cluster):
    objects = lesson_objects()
    for obj in (objects.trainjob, objects.runtime, objects.jobset, *objects.jobs, *objects.pods):
        api.put(obj["kind"], obj)
    # jobset v0.12.0 jobset_controller.go createHeadlessSvcIfNecessary: named as the subdomain
    api.put("Service", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": JOB, "namespace": "default"},
                       "spec": {"clusterIP": "None", "selector": {"jobset.sigs.k8s.io/jobset-name": JOB}}})
    anatomy = await cluster.explain(JOB)
    assert anatomy.pod == "lesson-ddp-node-0-1-ab1cd"
    service = next(p for p in anatomy.pieces if p.name == "headless Service")
    assert service.value == "lesson-ddp (clusterIP None, selector jobset-name=lesson-ddp)"
    jobset = {row.name: row.note for row in anatomy.sections[2].rows}
    assert jobset["network"] == "headless Service lesson-ddp: present"
    assert [row.name for row in anatomy.sections[3].rows] == ["lesson-ddp-node-0"]
    assert not [r for method in ("POST", "PUT", "PATCH", "DELETE") for r in api.requests_for(method, "/")]


async def test_explain_of_an_unknown_job_is_not_found(api, cluster):
    with pytest.raises(NotFound, match="no TrainJob nope in namespace default"):
        await cluster.explain("nope")
