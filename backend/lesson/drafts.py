"""Starting text for a note the learner has not written yet. The template's headings and record
lines, quoted measurements ('>') and placeholders in angle brackets do not count towards a note's
check (see notes.py), so an untouched draft never passes, while the measured numbers are there to
cite."""

from __future__ import annotations

from backend.lesson.context import StepContext
from backend.lesson.notes import MEASURE_FIRST, MEASURED, PLATFORM_RECORD, SECTION_HEADINGS
from backend.lesson.reading import platform_record

# What each section asks, under its heading (notes.SECTION_HEADINGS), as a placeholder.
PLACEHOLDERS = {
    "Install method": "standalone components, raw manifests or a packaged distribution? on kind or minikube?",
    "Subprojects on the cluster": "which Kubeflow projects, and why only those?",
    "Launch model": "a declared TrainJob the controller reconciles, or a Python driver with Ray Train?",
    "Failure recovery": "who notices a dead worker, who restarts the group, where does it resume from?",
    "Who owns the job definition": "platform team or ML team?",
}


def _sections(step_id: str) -> str:
    return "".join(f"## {heading}\n<{PLACEHOLDERS.get(heading, '…')}>\n\n"
                   for heading in SECTION_HEADINGS[step_id])


def _setup_1(ctx: StepContext) -> str:
    return f"# {PLATFORM_RECORD} {platform_record(ctx)}\n\n" + _sections("setup-1")


def _step_2(ctx: StepContext) -> str:
    return _sections("2")


def _measured(ctx: StepContext) -> str:
    """The newest `kfcockpit compare` measurement as a quote, or a pointer to making one."""
    from backend.compare import latest_comparison

    comparison = latest_comparison(ctx.settings)
    if comparison is None:
        return f"# {MEASURE_FIRST}\n\n"
    quoted = "".join(f"> {text}".rstrip() + "\n" for text in comparison.as_note().splitlines())
    return f"# {MEASURED}\n\n" + quoted + "\n"


def with_measurement(note: str, ctx: StepContext) -> str:
    """A written note with the newest `kfcockpit compare` quoted where its draft asked for one
    (the "Measure both first" heading) or in place of an older quote; the rest, the learner's, is
    kept. Unchanged when nothing is measured yet, or the learner removed the heading."""
    measured = _measured(ctx)
    if not measured.startswith(f"# {MEASURED}"):
        return note
    lines = note.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines)
                  if line.lstrip("# ").startswith((MEASURE_FIRST, MEASURED))), None)
    if start is None:
        return note
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or lines[end].lstrip().startswith(">")):
        end += 1  # the old quote and the blank lines around it
    return "".join(lines[:start]) + measured + "".join(lines[end:])


def _step_10(ctx: StepContext) -> str:
    return _measured(ctx) + _sections("10")


def _step_7(ctx: StepContext) -> str:
    return ("<run step 7: it makes a one-worker and a two-worker run, snapshots the volume after "
            "each and fills in their final loss and wall time here>\n")


DRAFTS = {"setup-1": _setup_1, "2": _step_2, "7": _step_7, "10": _step_10}


async def draft(ctx: StepContext) -> str:
    make = DRAFTS.get(ctx.step.id)
    return make(ctx) if make else ""
