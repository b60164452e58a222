"""A TrainJob as the cockpit's `JobSummary`: its conditions say whether it is done, the JobSet the
Trainer made from it (same name) says how far it is and how often it restarted the group.
"""

from __future__ import annotations

from pydantic import ValidationError

from backend.kube.pods import parse_time
from backend.models import TRAINER_CONTAINER, Condition, JobPhase, JobSummary, TrainJob, on_claim
from training.options import option_value


def _true(conditions: list[dict], kind: str) -> dict | None:
    for condition in conditions:
        if condition.get("type") == kind and condition.get("status") == "True":
            return condition
    return None


def _conditions(raw: dict | None) -> list[dict]:
    return list(((raw or {}).get("status") or {}).get("conditions") or [])


def _num_nodes(trainjob: dict, jobset: dict | None) -> int:
    nodes = ((trainjob.get("spec") or {}).get("trainer") or {}).get("numNodes")
    if nodes:
        return int(nodes)
    for job in ((jobset or {}).get("spec") or {}).get("replicatedJobs") or []:
        if job.get("name") == TRAINER_CONTAINER:
            return int(((job.get("template") or {}).get("spec") or {}).get("parallelism") or 1)
    return 1


def _volumes(trainjob: dict) -> tuple[list[str], list[tuple[str, str]]]:
    """(claims mounted, (claim, run directory) of its `--ckpt-dir`): where goodput finds its record."""
    try:
        job = TrainJob.model_validate(trainjob)
    except ValidationError:
        return [], []  # a TrainJob the cockpit did not write: show it, without volumes
    mounts = job.volume_mounts()
    trainer = job.spec.trainer
    ckpt_dir = option_value([*trainer.command, *trainer.args], "--ckpt-dir") if trainer else None
    run = on_claim(ckpt_dir, mounts) if ckpt_dir else None
    return [claim for claim, _ in mounts], [run] if run else []


def summarize(trainjob: dict, jobset: dict | None) -> JobSummary:
    meta = trainjob.get("metadata") or {}
    if jobset is not None and not _made_by(jobset, meta.get("uid")):
        jobset = None  # the JobSet of a job of this name deleted before, not collected yet
    job_conditions = _conditions(trainjob)
    set_conditions = _conditions(jobset)
    set_status = (jobset or {}).get("status") or {}
    restarts = int(set_status.get("restarts") or 0)
    max_restarts = int((((jobset or {}).get("spec") or {}).get("failurePolicy") or {}).get("maxRestarts") or 0)

    # The TrainJob's own conditions decide; the JobSet's are a fallback while the Trainer has not
    # copied them yet.
    done = (_true(job_conditions, "Complete") or _true(job_conditions, "Failed")
            or _true(set_conditions, "Completed") or _true(set_conditions, "Failed"))
    suspended = _true(job_conditions, "Suspended") or _true(set_conditions, "Suspended")
    replicated = set_status.get("replicatedJobsStatus") or []
    expected = len(((jobset or {}).get("spec") or {}).get("replicatedJobs") or []) or 1
    ready = sum(int(r.get("ready") or 0) + int(r.get("succeeded") or 0) for r in replicated)
    if done:
        phase = JobPhase.COMPLETE if done.get("type") in ("Complete", "Completed") else JobPhase.FAILED
    elif suspended or jobset is None:
        phase = JobPhase.CREATED
    elif ready >= expected:
        phase = JobPhase.RUNNING
    elif restarts > 0:
        phase = JobPhase.RESTARTING  # the group is being recreated after a worker failed
    else:
        phase = JobPhase.CREATED  # accepted, workers not all running yet
    decisive = done or suspended or (set_conditions[-1] if set_conditions else {})
    conditions = []
    for condition in job_conditions:
        try:
            conditions.append(Condition.model_validate(condition))
        except ValidationError:
            continue
    volumes, run_dirs = _volumes(trainjob)
    trainer_status = (trainjob.get("status") or {}).get("trainerStatus") or {}
    return JobSummary(
        name=meta.get("name", ""),
        phase=phase,
        num_nodes=_num_nodes(trainjob, jobset),
        restart_attempt=restarts,
        max_restarts=max_restarts,
        restarts_counted=_int_or_none(set_status.get("restartsCountTowardsMax")),
        uid=str(meta.get("uid") or ""),
        group_uid=str(((jobset or {}).get("metadata") or {}).get("uid") or ""),
        created=parse_time(meta.get("creationTimestamp")) or 0.0,
        finished=parse_time(done.get("lastTransitionTime")) if done else None,
        reason=decisive.get("reason", "") or "",
        message=" ".join(str(decisive.get("message", "") or "").split()),
        volumes=volumes,
        run_dirs=run_dirs,
        conditions=conditions,
        progress=_int_or_none(trainer_status.get("progressPercentage")),
        remaining=_int_or_none(trainer_status.get("estimatedRemainingSeconds")),
    )


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _made_by(jobset: dict, trainjob_uid: str | None) -> bool:
    """Whether the JobSet is this TrainJob's: its owner reference names the TrainJob's uid (one
    without owner references, or a TrainJob without a uid, is taken as it is)."""
    owners = (jobset.get("metadata") or {}).get("ownerReferences") or []
    return not trainjob_uid or not owners or any(o.get("uid") == trainjob_uid for o in owners)
