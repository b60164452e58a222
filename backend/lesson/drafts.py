"""Starting text for a note the learner has not written yet. Headings ('#'), quoted measurements
('>') and placeholders in angle brackets do not count towards a note's check (see notes.py), so an
untouched draft never passes, while the measured numbers are there to cite."""

from __future__ import annotations

from backend.lesson.context import StepContext
from backend.lesson.reading import platform_record


def _sections(*pairs: tuple[str, str]) -> str:
    return "".join(f"## {heading}\n<{placeholder}>\n\n" for heading, placeholder in pairs)


def _setup_1(ctx: StepContext) -> str:
    return f"# Platform in the cockpit: {platform_record(ctx)}\n\n" + _sections(
        ("Install method", "standalone components, raw manifests or a packaged distribution? "
                           "on kind or minikube?"),
        ("Subprojects on the cluster", "which Kubeflow projects, and why only those?"),
    )


def _step_2(ctx: StepContext) -> str:
    return _sections(("What the Trainer does for a job", "…"), ("What it leaves to PyTorch", "…"))


def _measured(ctx: StepContext) -> str:
    """The newest `kfcockpit compare` measurement as a quote, or a pointer to making one."""
    from backend.compare import latest_comparison

    comparison = latest_comparison(ctx.settings)
    if comparison is None:
        return "# Measure both first: kfcockpit compare (its table is quoted here)\n\n"
    quoted = "".join(f"> {text}".rstrip() + "\n" for text in comparison.as_note().splitlines())
    return "# Measured by kfcockpit compare\n\n" + quoted + "\n"


def _step_10(ctx: StepContext) -> str:
    return _measured(ctx) + _sections(
        ("Launch model", "a declared TrainJob the controller reconciles, or a Python driver with Ray Train?"),
        ("Failure recovery", "who notices a dead worker, who restarts the group, where does it resume from?"),
        ("Who owns the job definition", "platform team or ML team?"),
        ("Which I would give to which team", "…"),
    )


def _step_7(ctx: StepContext) -> str:
    return ("<run step 7: it makes a one-worker and a two-worker run, snapshots the volume after "
            "each and fills in their final loss and wall time here>\n")


DRAFTS = {"setup-1": _setup_1, "2": _step_2, "7": _step_7, "10": _step_10}


async def draft(ctx: StepContext) -> str:
    make = DRAFTS.get(ctx.step.id)
    return make(ctx) if make else ""
