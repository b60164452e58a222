"""The lesson checklist: one line per step with a status glyph, always visible on the left.

It owns which step is highlighted and each step's shown status; it tells the screen when the
highlight moves (StepChosen) and when the learner asks to run the step (RunRequested)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from textual.binding import Binding
from textual.content import Content
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from tui.model.format import STATUS_LOOK
from tui.widgets.message import WidgetMessage

if TYPE_CHECKING:
    from backend.lesson.progress import StepState
    from backend.lesson.steps import Step


def status_of(state: "StepState | None") -> str:
    if state is None:
        return "todo"
    return state.status.value


@dataclass
class ChecklistMessage(WidgetMessage):
    step_id: str


class Checklist(OptionList):
    BORDER_TITLE = "lesson"

    # enter runs the step (the screen decides); a mouse click only highlights, so nothing starts
    # a training job by accident.
    BINDINGS = [Binding("enter", "run_highlighted", "Run", key_display="⏎")]

    class StepChosen(ChecklistMessage):
        """The highlight moved to a step."""

    class RunRequested(ChecklistMessage):
        """enter on a step."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.steps: list["Step"] = []
        self.status: dict[str, str] = {}

    @property
    def step_id(self) -> str | None:
        if self.highlighted is None:
            return None
        return self.get_option_at_index(self.highlighted).id

    def set_steps(self, steps: Iterable["Step"], states: dict[str, "StepState"]) -> None:
        self.steps = list(steps)
        self.status = {s.id: status_of(states.get(s.id)) for s in self.steps}
        options: list[Option] = []
        section = None
        for step in self.steps:
            if step.section != section:
                section = step.section
                options.append(Option(Content.styled(section, "bold $accent"), id=f"section:{section}",
                                      disabled=True))
            options.append(Option(self._prompt(step), id=step.id))
        self.set_options(options)
        first_open = next((s.id for s in self.steps if self.status[s.id] != "done"), None)
        self.select_step(first_open or (self.steps[0].id if self.steps else None))

    def set_states(self, states: dict[str, "StepState"]) -> None:
        """Redraw only the steps whose status changed."""
        for step in self.steps:
            status = status_of(states.get(step.id))
            if self.status.get(step.id) != status:
                self.set_status(step.id, status)

    def set_status(self, step_id: str, status: str) -> None:
        self.status[step_id] = status
        step = next((s for s in self.steps if s.id == step_id), None)
        if step is not None:
            self.replace_option_prompt(step_id, self._prompt(step))

    def select_step(self, step_id: str | None) -> None:
        if step_id is None:
            return
        self.highlighted = self.get_option_index(step_id)

    def move(self, delta: int) -> None:
        """Next/previous step, skipping section headers; stays at the ends."""
        ids = [s.id for s in self.steps]
        if not ids:
            return
        current = self.step_id
        index = ids.index(current) if current in ids else -1
        self.select_step(ids[max(0, min(len(ids) - 1, index + delta))])

    def _prompt(self, step: "Step") -> Content:
        glyph, _word, style = STATUS_LOOK.get(self.status.get(step.id, "todo"), STATUS_LOOK["todo"])
        # The number alone: the section heading above says whether it is "setup 2" or "step 2".
        # The short title: a cut title (`Pick how to install Kubeflo…`) said less than a whole short one.
        return Content.assemble((glyph, style), " ", (f"{step.number:>2}", "bold"), " ", step.checklist_title)

    def action_run_highlighted(self) -> None:
        if self.step_id is not None:
            self.post_message(self.RunRequested(self, self.step_id))

    def _on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        if event.option.id and not event.option.id.startswith("section:"):
            self.post_message(self.StepChosen(self, event.option.id))

    def _on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()  # a click: highlighting is all it does
