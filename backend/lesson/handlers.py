"""Which run action and verify belong to which step."""

from __future__ import annotations

from backend.lesson import (ddp_step, definition_steps, pipeline_steps, reading, resume_step,
                            scaling_step, setup_steps)
from backend.lesson.context import Handler
from backend.lesson.steps import STEP_IDS

HANDLERS: dict[str, Handler] = {}
for _module in (reading, setup_steps, ddp_step, pipeline_steps, resume_step, scaling_step,
                definition_steps):
    HANDLERS.update(_module.HANDLERS)

assert sorted(HANDLERS) == sorted(STEP_IDS), "every step needs a handler"
