"""What `explain` knows of a job: the objects it read and the anatomy made of them, as plain data
(no pydantic, no client: the cockpit draws it and the CLI prints it without importing more)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class JobObjects:
    """Every object of a TrainJob's chain as the API server returned it (JSON dicts): read once by
    the platform's side (backend/kube/anatomy.py), read here by pure rules."""

    trainjob: dict
    runtime: dict | None = None  # the (Cluster)TrainingRuntime; None when it is gone
    jobset: dict | None = None  # None until the Trainer made it
    jobs: tuple[dict, ...] = ()
    pods: tuple[dict, ...] = ()
    service: dict | None = None  # the JobSet's headless Service; None where absent or not served
    service_note: str = ""  # why there is none, when the cluster said


@dataclass(frozen=True)
class Source:
    """Who put a piece there, and the upstream code that does it (file and function)."""

    by: str  # short: "torch plugin", "JobSet controller", "scheduler", the patch's manager
    code: str  # where upstream does it


@dataclass(frozen=True)
class Piece:
    """One thing in a pod (an env variable, a volume, its node…) and who put it there."""

    kind: str  # "env", "volume", "mount", "label", "annotation", "network", "node", "device", "container"
    name: str
    value: str
    source: Source


@dataclass(frozen=True)
class Change:
    """One field a runtime patch set: `before` is None where the runtime had none."""

    path: str
    before: str | None
    after: str | None


@dataclass(frozen=True)
class PatchDiff:
    manager: str
    changes: tuple[Change, ...]


@dataclass(frozen=True)
class Row:
    """A line of a section: a name, what it is, and a note (who, or a count)."""

    name: str
    value: str
    note: str = ""


@dataclass(frozen=True)
class Section:
    title: str
    rows: tuple[Row, ...]


@dataclass(frozen=True)
class Anatomy:
    """A TrainJob's chain (TrainJob → runtime and its patches → JobSet → Jobs → pods) and, for one
    pod, each piece the platform put there with who did it; what the framework does apart."""

    job: str
    namespace: str
    sections: tuple[Section, ...]
    patches: tuple[PatchDiff, ...] = ()
    pod: str | None = None  # the pod taken apart
    rank: int | None = None
    pieces: tuple[Piece, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
