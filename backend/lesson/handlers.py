"""Which run action and verify belong to which step."""

from __future__ import annotations

from backend.lesson import ddp_step, reading, resume_step, scaling_step, setup_steps
from backend.lesson.context import Handler, StepContext
from backend.models import Evidence


def pending(needs: str) -> Handler:
    """A step whose machinery is not built yet: it says so, it never passes."""
    reason = f"not available yet: needs {needs}"

    async def verify(ctx: StepContext) -> Evidence:
        return ctx.evidence(False, reason)

    return Handler(verify=verify, unavailable=lambda ctx: reason)


def _registry() -> dict[str, Handler]:
    handlers: dict[str, Handler] = {}
    handlers.update(reading.HANDLERS)
    handlers.update(setup_steps.HANDLERS)
    handlers.update(ddp_step.HANDLERS)
    handlers.update(resume_step.HANDLERS)
    handlers.update(scaling_step.HANDLERS)
    for step_id, needs in {
        "1": "the one-step print pipeline (backend/pipelines)",
        "4": "the TrainJob-submitting pipeline component (backend/pipelines)",
        "5": "the checkpoint-volume pipeline component (backend/pipelines)",
        "8": "the Ray Train variant (training/ray_train.py) and its pipeline component",
        "9": "the pinned base image in the pipeline (backend/pipelines)",
        "11": "the pipeline's platform settings (backend/pipelines)",
        "12": "the compiled pipeline (manifests/pipeline.yaml, backend/pipelines)",
    }.items():
        handlers[step_id] = pending(needs)
    return handlers


HANDLERS = _registry()
