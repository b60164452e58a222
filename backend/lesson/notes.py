"""What a reading step's note must cover, and the check that it does.

A note passes when it touches every topic the step's "done when" names. Each topic is one or more
groups of words; the topic is covered when every group has at least one of its words in the note.
Headings (lines starting with '#'), quoted lines ('>': measurements the cockpit pre-filled, which
you cite but did not write) and text in angle brackets belong to a pre-filled template and do not
count.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from backend.models import Evidence


@dataclass(frozen=True)
class Topic:
    name: str
    groups: tuple[tuple[str, ...], ...]  # every group needs one match

    def covered_by(self, text: str) -> bool:
        return all(any(_mentions(text, word) for word in group) for group in self.groups)

    def hint(self) -> str:
        return " and ".join("/".join(group[:4]) for group in self.groups)


def _mentions(text: str, word: str) -> bool:
    # A word must start at a word boundary ("own" must not match "down"); stems match
    # ("restart" in "restarted").
    return re.search(r"(?<![a-z0-9])" + re.escape(word), text) is not None


TOPICS: dict[str, list[Topic]] = {
    "setup-1": [
        Topic("install method", (("standalone", "manifest", "kustomize", "distribution", "helm",
                                  "kubectl apply", "operator"),)),
        Topic("Kubeflow Trainer", (("trainer", "training operator", "training-operator"),)),
        Topic("Kubeflow Pipelines", (("pipelines", "kfp"),)),
    ],
    "2": [
        Topic("what the Trainer does: launching the workers",
              (("launch", "start", "creat", "spawn", "schedul", "run"),
               ("pod", "worker", "process", "node", "replica"))),
        Topic("how the workers find each other (rank, world size, peers)",
              (("rank", "world size", "world_size", "master", "rendezvous", "peer", "pet_",
                "environment", "env"),)),
        Topic("what PyTorch does: synchronising gradients",
              (("gradient", "all-reduce", "allreduce", "all reduce", "ddp", "distributeddataparallel",
                "process group", "backward"),)),
    ],
    "7": [
        Topic("final loss", (("loss",),)),
        Topic("wall time", (("wall", "time", "second"),)),
        Topic("the one-worker run", (("1 worker", "one worker", "1-worker", "single", "| 1 |"),)),
        Topic("the two-worker run", (("2 workers", "two workers", "2-worker", "| 2 |"),)),
    ],
    "10": [
        Topic("both approaches", (("ray",), ("trainer", "trainjob", "kubeflow"))),
        Topic("launch model", (("launch", "declar", "trainjob", "resource", "scalingconfig",
                                "scaling config", "torchtrainer", "submit"),)),
        Topic("failure recovery", (("failure", "recover", "restart", "resume", "fault"),)),
        Topic("who owns the job definition", (("own", "team", "responsib", "maintain"),)),
    ],
}

_PLACEHOLDER = re.compile(r"<[^<>\n]*>")


def covered_text(note: str) -> str:
    own = [text for text in note.splitlines() if not text.lstrip().startswith(("#", ">"))]
    return _PLACEHOLDER.sub(" ", "\n".join(own)).lower()


def check_note(step_id: str, note: str, command: str) -> Evidence:
    """Does the note cover the step's topics? `command` tells the learner how to write one."""
    topics = TOPICS.get(step_id, [])
    checked = "your note covers " + ", ".join(t.name for t in topics)
    text = covered_text(note)
    if not text.strip():
        return Evidence(ok=False, checked=checked, at=time.time(),
                        seen=f"no note yet: write one in the cockpit or with `{command}`")
    missing = [t for t in topics if not t.covered_by(text)]
    covered = [t.name for t in topics if t not in missing]
    if missing:
        return Evidence(
            ok=False, checked=checked, at=time.time(),
            seen="missing: " + "; ".join(f"{t.name} (mention e.g. {t.hint()})" for t in missing),
            details=[f"covered: {name}" for name in covered],
        )
    words = len(text.split())
    return Evidence(ok=True, checked=checked, at=time.time(),
                    seen=f"a {words}-word note covering all {len(topics)} topics",
                    details=[f"covered: {name}" for name in covered])
