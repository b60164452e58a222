"""What the TrainJob steps share: the lesson's manifests, a fresh job per run, the record of which
job a step started, and reading a job's logs back from the platform."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass

from backend.cluster import Cluster
from backend.lesson.context import StepContext
from training.atomic import write_atomic
from backend.models import LogLine, TrainJob, parse_manifests
from backend.project import MANIFESTS
from training.logfmt import step_and_loss
from training.options import option_args

VOLUME = "checkpoints"  # manifests/volume.yaml
MOUNT = "/checkpoints"  # where manifests/trainjob.yaml mounts it
RECORD = "job.json"


async def apply_runtime_and_volume(cluster: Cluster) -> list[str]:
    """The lesson's TrainingRuntime and checkpoint PVC, as committed in manifests/."""
    results = []
    for name in ("runtime.yaml", "volume.yaml"):
        for resource in parse_manifests((MANIFESTS / name).read_text(), f"manifests/{name}"):
            results.append(await cluster.apply(resource))
    return results


def lesson_trainjob(name: str, num_nodes: int, steps: int, ckpt_every: int = 5,
                    step_delay: float = 0.1) -> TrainJob:
    """manifests/trainjob.yaml with this run's name, worker count and checkpoint directory (one
    directory per run on the shared volume, so a new run never resumes an old one)."""
    (job,) = parse_manifests((MANIFESTS / "trainjob.yaml").read_text(), "manifests/trainjob.yaml")
    job.metadata.name = name
    job.spec.trainer.num_nodes = num_nodes
    job.spec.trainer.args = option_args({"steps": steps, "ckpt_dir": f"{MOUNT}/{name}", "ckpt_every": ckpt_every,
                                         "step_delay": step_delay})
    return job


def fresh_name(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(3)}"


@dataclass
class JobRecord:
    """Which jobs a step's run started: the verify looks them up on the platform."""

    jobs: list[str]
    volume: str = VOLUME

    def save(self, ctx: StepContext) -> None:
        write_atomic(ctx.run_dir / RECORD, json.dumps(self.__dict__, indent=2) + "\n")

    @classmethod
    def load(cls, ctx: StepContext) -> "JobRecord | None":
        try:
            data = json.loads((ctx.run_dir / RECORD).read_text())
            return cls(jobs=list(data["jobs"]), volume=data.get("volume", VOLUME))
        except (OSError, ValueError, KeyError):
            return None


async def job_logs(cluster: Cluster, job: str) -> list[LogLine]:
    """Every line every pod of the job printed, replacement pods included."""
    lines: list[LogLine] = []
    async for batch in cluster.stream_logs(job, follow=False):
        lines.extend(batch)
    return lines



def step_of(log: LogLine) -> int | None:
    """The training step a line reports, read from its text (not trusting a platform's parse)."""
    parsed = step_and_loss(log.text) if "event=" not in log.text else None
    return parsed[0] if parsed else None
