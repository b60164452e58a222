"""`explain`'s reads: every object of a TrainJob's chain (the TrainJob, its runtime, the JobSet,
its Jobs and pods, its headless Service), read once through the Kubernetes API, and the anatomy
made of them (backend/anatomy). Reads only, no cluster-specific call: a real cluster and the
embedded one answer the same requests.
"""

from __future__ import annotations

import asyncio

from backend.anatomy.build import DEFAULT_RANK, anatomy_of
from backend.anatomy.model import Anatomy, JobObjects
from backend.cluster import NotFound
from backend.kube.connection import MissingType
from backend.kube.resources import Resources
from backend.models.labels import LABEL_JOB


async def read_job_objects(resources: Resources, name: str) -> JobObjects:
    """The chain of TrainJob `name`; NotFound (one line) when there is no such TrainJob."""
    try:
        trainjob = await resources.get("TrainJob", name)
    except NotFound:
        raise NotFound(f"no TrainJob {name} in namespace {resources.namespace} "
                       "(kfcockpit explain reads TrainJobs; list them with kubectl get trainjobs)") from None
    ref = (trainjob.get("spec") or {}).get("runtimeRef") or {}
    kind = ref.get("kind") or "ClusterTrainingRuntime"
    selector = f"{LABEL_JOB}={name}"
    runtime, jobset, jobs, pods = await asyncio.gather(
        resources.find(kind, ref.get("name", "")) if kind in ("TrainingRuntime", "ClusterTrainingRuntime")
        else _none(),
        resources.find("JobSet", name),
        resources.list("Job", label_selector=selector),
        resources.list("Pod", label_selector=selector))
    service, note = await _headless_service(resources, jobset)
    return JobObjects(trainjob=trainjob, runtime=runtime, jobset=jobset, jobs=tuple(jobs), pods=tuple(pods),
                      service=service, service_note=note)


async def _none() -> None:
    return None


async def _headless_service(resources: Resources, jobset: dict | None) -> tuple[dict | None, str]:
    """The Service JobSet makes for its pods' DNS names (named as its subdomain), or why none."""
    if jobset is None:
        return None, ""
    network = (jobset.get("spec") or {}).get("network") or {}
    if network.get("enableDNSHostnames") is False:
        return None, "none: enableDNSHostnames is false"
    name = network.get("subdomain") or jobset["metadata"]["name"]
    try:
        return await resources.get("Service", name), ""
    except MissingType:  # the embedded cluster: every pod is 127.0.0.1, its kubelet resolves the names
        return None, "this cluster serves no Services: its pods' DNS names resolve without one"
    except NotFound:
        return None, "not found"


async def explain(resources: Resources, name: str, rank: int = DEFAULT_RANK) -> Anatomy:
    return anatomy_of(await read_job_objects(resources, name), rank)
