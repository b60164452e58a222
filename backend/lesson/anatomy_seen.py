"""What the learner looked at for step 2: the anatomy of one of their jobs (the cockpit's `a`,
`kfcockpit explain`), kept in step 2's run directory as the few facts its verify cites beside the
note: which pod, its PET_* variables by the torch plugin, its volumes by their managers, its node
by the scheduler. The note is still what passes the step; this says what the note can be
checked against."""

from __future__ import annotations

import json
from pathlib import Path

from backend.anatomy.model import Anatomy
from training.atomic import write_atomic

STEP = "2"
SEEN = "anatomy-seen.json"


def facts(anatomy: Anatomy) -> dict:
    """The pieces a person checks a step 2 note against, by who put them there."""
    by_kind: dict[str, list[list[str]]] = {}
    for piece in anatomy.pieces:
        if piece.kind in ("env", "volume", "node") and (piece.kind != "env" or piece.name.startswith("PET_")):
            by_kind.setdefault(piece.kind, []).append([piece.name, piece.value, piece.source.by])
    return {"job": anatomy.job, "pod": anatomy.pod, "rank": anatomy.rank, **by_kind}


def keep(run_dir: Path, anatomy: Anatomy) -> None:
    if anatomy.pod is not None:  # a job with no pod yet shows no piece worth citing
        run_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(run_dir / SEEN, json.dumps(facts(anatomy), indent=2) + "\n")


def cited(run_dir: Path) -> list[str]:
    """Evidence lines: what the learner looked at, or where to look."""
    try:
        seen = json.loads((run_dir / SEEN).read_text())
        job, pod, rank = seen["job"], seen["pod"], seen["rank"]
    except (OSError, ValueError, KeyError):
        return ["see it on a pod: a job running, press a in the cockpit (or kfcockpit explain NAME)"]
    torch = sorted(name for name, _value, by in seen.get("env", []) if by == "torch plugin")
    lines = [f"you looked at {job}'s pod {pod} (rank {rank}):",
             f"  {', '.join(torch) or 'no PET_* variable'}: by the Trainer's torch plugin"]
    lines += [f"  volume {name} ({value}): by {by}" for name, value, by in seen.get("volume", [])]
    lines += [f"  node {value}: by the {by}" for _name, value, by in seen.get("node", [])]
    lines.append("  the process group, the all-reduce and the checkpoints: PyTorch's and the training code's")
    return lines
