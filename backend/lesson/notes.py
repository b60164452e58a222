"""What a reading step's note must cover, and the check that it does.

A note passes when it touches every topic the step's "done when" names. Each topic is one or more
groups of words; the topic is covered when every group has at least one of its words in the note.
What the cockpit pre-filled does not count: the template's section headings ("## Launch model"),
its record lines ("# Platform in the cockpit: …"), quoted lines ('>': measurements you cite but did
not write) and text in angle brackets. Everything the learner types counts, on any line, headings
included: "## Launch model: a declared TrainJob" counts from "a declared".
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from backend.models import Evidence
from backend.words import counted


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
        Topic("the one-worker run", (("1 worker", "one worker", "1-worker", "one-worker", "single", "| 1 |"),)),
        Topic("the two-worker run", (("2 workers", "two workers", "2-worker", "two-worker", "2 worker", "two worker",
                                      "| 2 |"),)),
    ],
    "10": [
        Topic("both approaches", (("ray",), ("trainer", "trainjob", "kubeflow"))),
        Topic("launch model", (("launch", "declar", "trainjob", "resource", "scalingconfig",
                                "scaling config", "torchtrainer", "submit"),)),
        Topic("failure recovery", (("failure", "recover", "restart", "resume", "fault"),)),
        Topic("who owns the job definition", (("own", "team", "responsib", "maintain"),)),
    ],
}

# The headings drafts.py writes into a step's template. On a heading line, these words are the
# template's and what follows them is the learner's.
SECTION_HEADINGS: dict[str, tuple[str, ...]] = {
    "setup-1": ("Install method", "Subprojects on the cluster"),
    "2": ("What the Trainer does for a job", "What it leaves to PyTorch"),
    "10": ("Launch model", "Failure recovery", "Who owns the job definition",
           "Which I would give to which team"),
}
# The cockpit's own record lines (the platform it is connected to, where the measurement is): the
# whole line is the cockpit's, like a quote.
PLATFORM_RECORD = "Platform in the cockpit:"
MEASURED = "Measured by kfcockpit compare"
MEASURE_FIRST = "Measure both first: kfcockpit compare (its table is quoted here)"
RECORD_HEADINGS = (PLATFORM_RECORD, MEASURED, MEASURE_FIRST)

_PLACEHOLDER = re.compile(r"<[^<>\n]*>")
_TEMPLATE_HEADINGS = tuple(sorted({h.lower() for hs in SECTION_HEADINGS.values() for h in hs}, key=len,
                                  reverse=True))  # the longest first: one heading may start another


def _own_part(line: str) -> str:
    """What of one line the learner wrote (see the module's docstring)."""
    text = line.lstrip()
    if text.startswith(">"):
        return ""
    if not text.startswith("#"):
        return line
    heading = text.lstrip("#").strip()
    if heading.startswith(RECORD_HEADINGS):
        return ""
    lowered = heading.lower()
    for template in _TEMPLATE_HEADINGS:
        if lowered.startswith(template):
            return heading[len(template):].lstrip(" :-–—")
    return heading


def covered_text(note: str) -> str:
    own = [_own_part(line) for line in note.splitlines()]
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
                    seen=f"{counted(words, 'word')} note covering all {len(topics)} topics",
                    details=[f"covered: {name}" for name in covered])
