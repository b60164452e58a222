"""Reading steps (setup 1, step 2, step 10): done by a note the learner writes."""

from __future__ import annotations

from backend.lesson import anatomy_seen
from backend.lesson.context import Handler, StepContext
from backend.lesson.notes import check_note
from backend.models import Evidence


def platform_record(ctx: StepContext) -> str:
    """The platform choice as the cockpit's settings hold it."""
    return ctx.capabilities.record


def note_command(step_id: str) -> str:
    return f"kfcockpit lesson note {step_id} --note FILE"


async def verify_reading(ctx: StepContext) -> Evidence:
    evidence = check_note(ctx.step.id, ctx.note(ctx.step.id), note_command(ctx.step.id))
    if ctx.step.id == "setup-1":
        evidence.details.append(f"platform in the cockpit: {platform_record(ctx)}")
    if ctx.step.id == anatomy_seen.STEP:
        evidence.details += anatomy_seen.cited(ctx.run_dir)
    return evidence


HANDLERS = {step_id: Handler(verify=verify_reading) for step_id in ("setup-1", "2", "10")}
