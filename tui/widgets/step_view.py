"""The selected step: why, done-when, the doc link, the evidence of its last check, its actions,
its run output and, for reading steps, the learner's note (saved through the lesson engine)."""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING, Callable

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.widgets import Button, Log, Static, TextArea

from tui import format as fmt
from tui.format import STATUS_LOOK
from tui.widgets.checklist import status_of, step_label

if TYPE_CHECKING:
    from backend.lesson.progress import StepState
    from backend.lesson.steps import Step
    from backend.models import Evidence

OUTPUT_LINES = 500  # per step; a run prints progress, not training logs (those go to the logs tab)


def evidence_content(evidence: "Evidence | None", now: float) -> Content:
    if evidence is None:
        return Content.styled("not checked yet · press v to check", "dim")
    mark = ("✔ passed", "bold $success") if evidence.ok else ("✘ not yet", "bold $error")
    when = f" · {fmt.age(now - evidence.at)} ago" if evidence.at else ""
    parts: list = [mark, (when, "dim"), "\n", ("checked ", "bold"), evidence.checked, "\n",
                   ("seen ", "bold"), evidence.seen]
    for detail in evidence.details:
        parts += ["\n  · ", detail]
    return Content.assemble(*parts)


class StepView(VerticalScroll):
    BORDER_TITLE = "step"

    BINDINGS = [Binding("ctrl+s", "save_note", "Save note", show=False)]

    class RunPressed(Message):
        def __init__(self, step_id: str) -> None:
            super().__init__()
            self.step_id = step_id

    class VerifyPressed(Message):
        def __init__(self, step_id: str) -> None:
            super().__init__()
            self.step_id = step_id

    class NoteSaved(Message):
        def __init__(self, step_id: str, text: str) -> None:
            super().__init__()
            self.step_id = step_id
            self.text = text

    def __init__(self, clock: Callable[[], float] = time.time, **kwargs) -> None:
        super().__init__(**kwargs)
        self.clock = clock
        self.step: "Step | None" = None
        self._outputs: dict[str, deque[str]] = {}

    def compose(self) -> ComposeResult:
        yield Static(id="step-heading")
        yield Static(id="step-why")
        yield Static(id="step-done-when")
        yield Static(id="step-doc")
        yield Static(id="step-evidence")
        with Horizontal(id="step-actions"):
            yield Button("Run ⏎", id="step-run", compact=True, variant="primary")
            yield Button("Verify v", id="step-verify", compact=True)
            yield Button("Save note ^s", id="step-save", compact=True)
        yield TextArea(id="step-note", soft_wrap=True, show_line_numbers=False)
        yield Static("run output", id="step-output-title", classes="subtitle")
        yield Log(id="step-output", max_lines=OUTPUT_LINES)

    def show(self, step: "Step", state: "StepState | None", note: str, running: bool = False) -> None:
        changed = self.step is None or self.step.id != step.id
        self.step = step
        status = "running" if running else status_of(state)
        glyph, word, style = STATUS_LOOK.get(status, STATUS_LOOK["todo"])
        self.border_title = f"step {step_label(step)}"
        self.query_one("#step-heading", Static).update(Content.assemble(
            (f"{glyph} {word}", style), "  ", (step.title, "bold")))
        self.query_one("#step-why", Static).update(step.why)
        self.query_one("#step-done-when", Static).update(
            Content.assemble(("Done when ", "bold $accent"), step.done_when))
        self.query_one("#step-doc", Static).update(Content.assemble(
            ("Read ", "bold $accent"), (step.doc_title, f"underline link={step.doc_url}"),
            "\n", (step.doc_url, "dim")))
        self.show_evidence(state.evidence if state else None)
        reading = step.kind == "reading"
        self.query_one("#step-run", Button).display = step.kind != "reading"
        self.query_one("#step-save", Button).display = reading
        note_area = self.query_one("#step-note", TextArea)
        note_area.display = reading
        self.query_one("#step-output-title").display = not reading  # a note has no run
        self.query_one("#step-output").display = not reading
        if reading:
            note_area.border_title = step.note_prompt or "your note"
            if changed or note_area.text != note:
                note_area.load_text(note)
        if changed:
            self._show_output(step.id)
            self.scroll_home(animate=False)

    def offer_draft(self, step_id: str, text: str) -> None:
        """Fill the note box with a draft, unless the learner moved on or has typed already."""
        note_area = self.query_one("#step-note", TextArea)
        if self.step is not None and self.step.id == step_id and not note_area.text.strip():
            note_area.load_text(text)

    def show_evidence(self, evidence: "Evidence | None") -> None:
        self.query_one("#step-evidence", Static).update(evidence_content(evidence, self.clock()))

    def add_output(self, step_id: str, text: str) -> None:
        lines = self._outputs.setdefault(step_id, deque(maxlen=OUTPUT_LINES))
        lines.append(text)
        if self.step is not None and self.step.id == step_id:
            self.query_one("#step-output", Log).write_line(text)

    def show_output_box(self) -> None:
        """Bring the run output into view (a run just started)."""
        self.query_one("#step-output", Log).scroll_visible(animate=False)

    def clear_output(self, step_id: str) -> None:
        self._outputs.pop(step_id, None)
        if self.step is not None and self.step.id == step_id:
            self.query_one("#step-output", Log).clear()

    def _show_output(self, step_id: str) -> None:
        log = self.query_one("#step-output", Log)
        log.clear()
        log.write_lines(self._outputs.get(step_id, ()))

    def action_save_note(self) -> None:
        if self.step is not None and self.step.kind == "reading":
            self.post_message(self.NoteSaved(self.step.id, self.query_one("#step-note", TextArea).text))

    @on(Button.Pressed, "#step-run")
    def _run(self, event: Button.Pressed) -> None:
        event.stop()
        if self.step is not None:
            self.post_message(self.RunPressed(self.step.id))

    @on(Button.Pressed, "#step-verify")
    def _verify(self, event: Button.Pressed) -> None:
        event.stop()
        if self.step is not None:
            self.post_message(self.VerifyPressed(self.step.id))

    @on(Button.Pressed, "#step-save")
    def _save(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_save_note()
