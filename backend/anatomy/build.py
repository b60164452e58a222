"""A TrainJob's anatomy from its objects (`JobObjects`): the chain as sections (TrainJob, runtime
and its patches, JobSet, Jobs, pods), and one pod taken apart (provenance.py). Pure: the same
objects give the same anatomy, whichever cluster they were read from."""

from __future__ import annotations

from backend.anatomy.model import Anatomy, JobObjects, Row, Section
from backend.anatomy.patches import patch_diffs
from backend.anatomy.provenance import pod_pieces
from backend.models.labels import LABEL_RANK, LABEL_RESTART_ATTEMPT

DEFAULT_RANK = 1  # rank 0's pod is also the master; rank 1's shows what every other rank gets


def _meta(obj: dict | None) -> dict:
    return (obj or {}).get("metadata") or {}


def _int(text: object, default: int = -1) -> int:
    try:
        return int(str(text))
    except ValueError:
        return default


def rank_of(pod: dict) -> int:
    return _int((_meta(pod).get("labels") or {}).get(LABEL_RANK))


def attempt_of(obj: dict) -> int:
    return _int((_meta(obj).get("labels") or {}).get(LABEL_RESTART_ATTEMPT), 0)


def pick_pod(pods: tuple[dict, ...], rank: int) -> dict | None:
    """The newest attempt's pod of `rank` (its newest, should two be listed)."""
    mine = [p for p in pods if rank_of(p) == rank]
    return max(mine, key=lambda p: (attempt_of(p), _meta(p).get("creationTimestamp") or ""), default=None)


def anatomy_of(objects: JobObjects, rank: int = DEFAULT_RANK) -> Anatomy:
    trainjob, runtime, jobset = objects.trainjob, objects.runtime, objects.jobset
    patches = (trainjob.get("spec") or {}).get("runtimePatches") or []
    diffs = patch_diffs(runtime, patches)
    notes: list[str] = []
    pod = pick_pod(objects.pods, rank)
    if pod is None and objects.pods:
        ranks = sorted({rank_of(p) for p in objects.pods})
        notes.append(f"no pod of rank {rank} (ranks {', '.join(map(str, ranks))}): rank {ranks[-1]}'s instead")
        rank = ranks[-1]
        pod = pick_pod(objects.pods, rank)
    elif pod is None:
        notes.append("no pods yet: the pieces come once the Job controller makes them")
    sections = (
        _trainjob_section(trainjob),
        _runtime_section(runtime, diffs),
        _jobset_section(jobset, objects),
        _jobs_section(objects.jobs),
        _pods_section(objects.pods, pod),
    )
    return Anatomy(job=_meta(trainjob).get("name", "?"), namespace=_meta(trainjob).get("namespace", ""),
                   sections=sections, patches=diffs, pod=_meta(pod).get("name") if pod else None,
                   rank=rank if pod else None,
                   pieces=tuple(pod_pieces(pod, trainjob, runtime, jobset,
                                           "" if objects.service else objects.service_note)) if pod else (),
                   notes=tuple(notes))


def _trainjob_section(trainjob: dict) -> Section:
    spec = trainjob.get("spec") or {}
    trainer = spec.get("trainer") or {}
    ref = spec.get("runtimeRef") or {}
    conditions = [c for c in (trainjob.get("status") or {}).get("conditions") or [] if c.get("status") == "True"]
    rows = [Row("runtimeRef", f"{ref.get('kind', 'ClusterTrainingRuntime')} {ref.get('name', '?')}"),
            Row("numNodes", str(trainer.get("numNodes", "the runtime's")),
                f"numProcPerNode {trainer.get('numProcPerNode', 'auto')}"),
            Row("runtimePatches", ", ".join(str(p.get("manager")) for p in spec.get("runtimePatches") or []) or "none")]
    rows += [Row("condition", c.get("type", "?"), c.get("reason", "")) for c in conditions]
    return Section(f"TrainJob {_meta(trainjob).get('name', '?')}", tuple(rows))


def _runtime_section(runtime: dict | None, diffs) -> Section:
    if runtime is None:
        return Section("runtime", (Row("runtime", "not found", "the TrainJob's runtimeRef names none"),))
    policy = (runtime.get("spec") or {}).get("mlPolicy") or {}
    frameworks = [k for k in policy if k not in ("numNodes",)]
    rows = [Row("mlPolicy", ", ".join(frameworks) or "none", f"numNodes {policy.get('numNodes', 1)}")]
    rows += [Row(f"patch {diff.manager}", f"{len(diff.changes)} field(s) changed", "the diff below")
             for diff in diffs]
    if not diffs:
        rows.append(Row("patches", "none: the JobSet is the runtime's template"))
    return Section(f"{runtime.get('kind', 'runtime')} {_meta(runtime).get('name', '?')}", tuple(rows))


def _jobset_section(jobset: dict | None, objects: JobObjects) -> Section:
    if jobset is None:
        return Section("JobSet", (Row("JobSet", "none yet", "the Trainer makes it from the runtime"),))
    spec, status = jobset.get("spec") or {}, jobset.get("status") or {}
    rows = []
    for rjob in spec.get("replicatedJobs") or []:
        job_spec = (rjob.get("template") or {}).get("spec") or {}
        rows.append(Row(f"replicatedJob {rjob.get('name')}", f"{rjob.get('replicas', 1)} Job(s) of "
                        f"{job_spec.get('parallelism', 1)} pod(s)", f"backoffLimit {job_spec.get('backoffLimit', 6)}"))
    failure = spec.get("failurePolicy")
    if failure:
        rules = ", ".join(str(r.get("action")) for r in failure.get("rules") or []) or "none"
        rows.append(Row("failurePolicy", f"maxRestarts {failure.get('maxRestarts', 0)}",
                        f"{failure.get('restartStrategy', 'Recreate')}; rules: {rules}"))
    else:
        rows.append(Row("failurePolicy", "none", "a failed Job fails the JobSet"))
    success = spec.get("successPolicy") or {}
    rows.append(Row("successPolicy", success.get("operator", "All"),
                    ", ".join(success.get("targetReplicatedJobs") or []) or "every replicated job"))
    budget = (failure or {}).get("maxRestarts", 0)
    used = status.get("restarts", 0)
    counted = status.get("restartsCountTowardsMax", used)
    rows.append(Row("restarts", f"{used} used, {counted} of {budget} counted", f"{max(0, budget - counted)} left"))
    network = spec.get("network") or {}
    subdomain = network.get("subdomain") or _meta(jobset).get("name", "?")
    service = "present" if objects.service else (objects.service_note or "not found")
    rows.append(Row("network", f"subdomain {subdomain}", f"headless Service {subdomain}: {service}"))
    return Section(f"JobSet {_meta(jobset).get('name', '?')}", tuple(rows))


def _jobs_section(jobs: tuple[dict, ...]) -> Section:
    rows = []
    for job in sorted(jobs, key=lambda j: (attempt_of(j), _meta(j).get("name", ""))):
        status = job.get("status") or {}
        counts = ", ".join(f"{status[k]} {k}" for k in ("active", "succeeded", "failed") if status.get(k))
        rows.append(Row(_meta(job).get("name", "?"), f"attempt {attempt_of(job)}", counts or "no pods counted"))
    return Section("Jobs", tuple(rows) or (Row("Jobs", "none yet"),))


def _pods_section(pods: tuple[dict, ...], chosen: dict | None) -> Section:
    rows = []
    for pod in sorted(pods, key=lambda p: (attempt_of(p), rank_of(p), _meta(p).get("name", ""))):
        name = _meta(pod).get("name", "?")
        phase = (pod.get("status") or {}).get("phase", "?")
        node = (pod.get("spec") or {}).get("nodeName") or "unscheduled"
        mark = " (taken apart below)" if chosen is not None and name == _meta(chosen).get("name") else ""
        rows.append(Row(name, f"rank {rank_of(pod)}, attempt {attempt_of(pod)}", f"{phase} on {node}{mark}"))
    return Section("pods", tuple(rows) or (Row("pods", "none yet"),))
