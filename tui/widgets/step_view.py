"""The selected step: its head (title, what is running, done-when, the keys that act on it) first,
so a card in few rows (80x24, under the checklist) still says what to do; then why, the doc link,
the evidence of its last check, its actions, its run output and, for steps done with a note
(reading steps, step 7), the learner's note (saved through the lesson engine). While the step
runs, its newest output line is under the heading, wrapped: a line that asks the learner to act
("kill a worker now: ctrl+k on a pod…") is read whole, never cut in a border; the run output
wraps too.

Everything shown here that the cockpit did not write (run output, evidence, notes) is plain text,
never markup: a Ray line starts with `[ray-train]`."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.widgets import Button, RichLog, Static, TextArea

from tui.model.format import STATUS_LOOK
from tui.widgets.checklist import status_of
from tui.widgets.message import WidgetMessage

if TYPE_CHECKING:
    from backend.lesson.progress import StepState
    from backend.lesson.steps import Step
    from backend.models import Evidence

OUTPUT_LINES = 500  # per step; a run prints progress, not training logs (those go to the logs tab)


def evidence_content(evidence: "Evidence | None", now: float) -> Content:
    if evidence is None:
        return Content.styled("not checked yet · press v to check", "dim")
    from backend.lesson.evidence import clock, respelled

    mark = ("✔ passed", "bold $success") if evidence.ok else ("✘ not yet", "bold $error")
    # The clock time, not "3m ago": the card is drawn when the step is shown and would go stale.
    when = f" at {clock(evidence.at, now)}" if evidence.at else ""
    # respelled: evidence saved before verifies spelled their values may hold Python reprs
    parts: list = [mark, (when, "dim"), "\n", ("checked ", "bold"), respelled(evidence.checked), "\n",
                   ("seen ", "bold"), respelled(evidence.seen)]
    for detail in evidence.details:
        parts += ["\n  · ", respelled(detail)]
    return Content.assemble(*parts)


def keys_content(step: "Step") -> Content:
    """The keys that act on the step, for a card too small for its buttons to be seen."""
    keys = ([] if step.kind == "reading" else [("⏎", "run")]) + [("v", "verify")]
    keys += [("e", "note")] if step.takes_note else []
    keys += [("m", "measure")] if step.measure is not None else []
    parts: list = []
    for key, what in [*keys, ("z", "zoom")]:
        parts += [(key, "bold $accent"), f" {what}  "]
    return Content.assemble(*parts).rstrip()


def note_prompt_content(prompt: str | None) -> Content:
    return Content.assemble(("Your note: ", "bold $accent"), prompt or "Write what the step asks.", "\n",
                            ("Everything you type counts, on any line, headings too; the template's "
                             "headings, quoted '>' lines and <placeholders> do not.", "dim"))


def with_code(text: str) -> Content:
    """The lesson's own text with its `code` spans drawn as code, not as raw backticks. Only for
    the cockpit's own strings (the steps' texts); a span's text is plain, never markup."""
    parts: list = []
    for i, piece in enumerate(text.split("`")):
        if piece:
            parts.append((piece, "bold $accent") if i % 2 else piece)
    return Content.assemble(*parts)


def doc_content(title: str, url: str, page: str | None) -> Content:
    """The step's reading: the lesson's title for it, the current page's own title where that is
    another (a v1 page that v2 replaced), and the address (folded where it is wider than the card)."""
    now = [("\n", ""), ("now: ", "dim"), (page, "italic")] if page else []
    return Content.assemble(("Read ", "bold $accent"), (title, f"underline link={url}"), *now, "\n", (url, "dim"))


NOTE_KEEP_DELAY = 1.0  # seconds after the last key before a typed note is kept


@dataclass
class StepMessage(WidgetMessage):
    """What the learner did with the shown step."""

    step_id: str


@dataclass
class NoteMessage(StepMessage):
    text: str


class StepView(VerticalScroll):
    DEFAULT_CSS = """
    StepView { padding: 0 1; scrollbar-size-vertical: 1; }
    StepView > Static { margin-bottom: 1; }
    #step-actions { height: 1; margin-bottom: 1; }
    #step-actions Button { margin-right: 2; }
    #step-note-prompt { margin-bottom: 0; }
    #step-note { height: 8; min-height: 5; border: round $accent; margin-bottom: 1; }
    #step-output-title { margin-bottom: 0; }
    #step-output { height: 8; border: round $secondary; overflow-y: auto; scrollbar-size: 1 1; }
    #step-latest { color: $warning; text-style: bold; display: none; }
    #step-keys { color: $text-muted; }
    #step-doc { text-overflow: fold; }
    """
    BORDER_TITLE = "step"

    BINDINGS = [
        Binding("ctrl+s", "save_note", "Save note"),
        Binding("escape", "leave_note", "Back to steps"),
    ]

    class RunPressed(StepMessage):
        pass

    class VerifyPressed(StepMessage):
        pass

    class MeasurePressed(StepMessage):
        pass

    class NoteSaved(NoteMessage):
        """The learner asked to save and check the note (ctrl+s)."""

    class NoteEdited(NoteMessage):
        """The note changed: keep it (no check), so a dropped session loses nothing."""

    class LeaveNote(StepMessage):
        """escape in the note: the learner wants the keys back."""

    @dataclass
    class HeadChanged(WidgetMessage):
        """The card's head may take another number of rows (another step, a running line)."""

        def can_replace(self, message: object) -> bool:
            return isinstance(message, StepView.HeadChanged)

    def __init__(self, clock: Callable[[], float] = time.time, **kwargs) -> None:
        super().__init__(**kwargs)
        self.clock = clock
        self.step: "Step | None" = None
        self._outputs: dict[str, deque[str]] = {}
        self._note_loaded = ""  # the note as last loaded, so loading it is not taken for an edit
        self._unsaved: tuple[str, str] | None = None  # (step id, text) typed but not yet kept
        self._keep_timer = None
        self.running = False  # the step shown is running: its newest line is in the border
        # Set by the screen: keeps a note typed just before quitting, when messages stop.
        self.keep_on_exit: Callable[[str, str], None] | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="step-heading")
        yield Static(id="step-latest")
        yield Static(id="step-done-when")
        yield Static(id="step-keys")
        yield Static(id="step-why")
        yield Static(id="step-doc")
        yield Static(id="step-evidence")
        with Horizontal(id="step-actions"):
            yield Button("Run ⏎", id="step-run", compact=True, variant="primary")
            yield Button("Verify v", id="step-verify", compact=True)
            yield Button("Save note ^s", id="step-save", compact=True)
            yield Button("Measure m", id="step-measure", compact=True)
        yield Static(id="step-note-prompt")
        yield TextArea(id="step-note", soft_wrap=True, show_line_numbers=False)
        yield Static("run output", id="step-output-title", classes="subtitle")
        yield RichLog(id="step-output", max_lines=OUTPUT_LINES, wrap=True, markup=False, highlight=False,
                      min_width=16)

    def show(self, step: "Step", state: "StepState | None", note: str, running: bool = False) -> None:
        changed = self.step is None or self.step.id != step.id
        self.step = step
        self.border_title = step.label
        self._show_status("running" if running else status_of(state))
        self.query_one("#step-why", Static).update(with_code(step.why))
        self.query_one("#step-done-when", Static).update(
            Content.assemble(("Done when ", "bold $accent"), step.done_when))
        self.query_one("#step-keys", Static).update(keys_content(step))
        self.query_one("#step-doc", Static).update(doc_content(step.doc_title, step.doc_url, step.doc_page))
        self.show_evidence(state.evidence if state else None)
        reading, noted = step.kind == "reading", step.takes_note
        self.query_one("#step-run", Button).display = not reading
        self.query_one("#step-save", Button).display = noted
        note_area = self.query_one("#step-note", TextArea)
        note_area.display = noted
        self.query_one("#step-note-prompt").display = noted
        self.query_one("#step-measure", Button).display = step.measure is not None
        # a reading step has no run; one with a measurement shows what measuring prints
        self.query_one("#step-output-title").display = not reading or step.measure is not None
        self.query_one("#step-output").display = not reading or step.measure is not None
        if changed:
            self.keep_note()  # what was typed for the previous step is kept before it is replaced
        if noted:
            # The prompt above the box, wrapped: as the box's border title it was cut at every width.
            self.query_one("#step-note-prompt", Static).update(note_prompt_content(step.note_prompt))
            note_area.border_title = "your note · e writes · ctrl+s saves and checks"
            # the same step shown again (a refresh, the cluster connecting): what the learner
            # typed since the last load stays; an untouched box takes the note as saved now
            if changed or (note != self._note_loaded and note_area.text == self._note_loaded):
                self._note_loaded = note
                note_area.load_text(note)
        self.running = running
        lines = self._outputs.get(step.id)
        self._show_latest(lines[-1] if running and lines else None)
        if changed:
            self._show_output(step.id)
            self.scroll_home(animate=False)
        self.post_message(self.HeadChanged(self))

    def show_state(self, state: "StepState | None") -> None:
        """The shown step's status and evidence as saved elsewhere (another `kfcockpit lesson`),
        the note being written left as it is."""
        if self.step is not None and not self.running:
            self._show_status(status_of(state))
            self.show_evidence(state.evidence if state else None)

    def _show_status(self, status: str) -> None:
        glyph, word, style = STATUS_LOOK.get(status, STATUS_LOOK["todo"])
        self.query_one("#step-heading", Static).update(Content.assemble(
            (f"{glyph} {word}", style), "  ", (self.step.title, "bold")))

    def head_rows(self) -> int:
        """The rows the card needs to show its head whole at its width (borders included)."""
        keys = self.query_one("#step-keys")
        return keys.virtual_region_with_margin.bottom + self.gutter.height

    def offer_draft(self, step_id: str, text: str) -> None:
        """Fill the note box with a draft, unless the learner moved on or has typed already."""
        note_area = self.query_one("#step-note", TextArea)
        if self.step is not None and self.step.id == step_id and not note_area.text.strip():
            self._note_loaded = text
            note_area.load_text(text)

    def show_evidence(self, evidence: "Evidence | None") -> None:
        self.query_one("#step-evidence", Static).update(evidence_content(evidence, self.clock()))

    def add_output(self, step_id: str, text: str) -> None:
        lines = self._outputs.setdefault(step_id, deque(maxlen=OUTPUT_LINES))
        lines.append(text)
        if self.step is not None and self.step.id == step_id:
            self.query_one("#step-output", RichLog).write(Text(text), scroll_end=True)
            if self.running:
                self._show_latest(text)

    def _show_latest(self, text: str | None) -> None:
        """The running step's newest line, under the heading, whole (plain text: a run's output)."""
        latest = self.query_one("#step-latest", Static)
        self.post_message(self.HeadChanged(self))
        latest.display = text is not None
        if text is not None:
            latest.update(Content(f"▸ {text}"))

    def output_lines(self, step_id: str) -> list[str]:
        """What the step's run printed (the output box shows these, wrapped)."""
        return list(self._outputs.get(step_id, ()))

    def clear_output(self, step_id: str) -> None:
        self._outputs.pop(step_id, None)
        if self.step is not None and self.step.id == step_id:
            self.query_one("#step-output", RichLog).clear()

    def _show_output(self, step_id: str) -> None:
        log = self.query_one("#step-output", RichLog)
        log.clear()
        for line in self._outputs.get(step_id, ()):
            log.write(Text(line), scroll_end=True)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "save_note":  # in the footer only where there is a note to save
            return self.step is not None and self.step.takes_note
        return True

    def action_save_note(self) -> None:
        if self.step is not None and self.step.takes_note:
            self._unsaved = None
            self.post_message(self.NoteSaved(self, self.step.id, self.query_one("#step-note", TextArea).text))

    def focus_note(self) -> None:
        """Into the note, the cursor after what is written: the learner goes on writing."""
        note_area = self.query_one("#step-note", TextArea)
        note_area.focus()
        note_area.move_cursor(note_area.document.end)

    def action_leave_note(self) -> None:
        self.keep_note()
        if self.step is not None:
            self.post_message(self.LeaveNote(self, self.step.id))

    @on(TextArea.Changed, "#step-note")
    def _note_changed(self, event: TextArea.Changed) -> None:
        if self.step is None or not self.step.takes_note or event.text_area.text == self._note_loaded:
            return
        self._unsaved = (self.step.id, event.text_area.text)
        if self._keep_timer is not None:
            self._keep_timer.stop()
        self._keep_timer = self.set_timer(NOTE_KEEP_DELAY, self.keep_note)

    def keep_note(self) -> None:
        """Hand the typed note over to be kept now (also called on a timer after typing stops)."""
        pending = self.take_unsaved()
        if pending is not None:
            self.post_message(self.NoteEdited(self, *pending))

    def on_unmount(self) -> None:
        pending = self.take_unsaved()
        if pending is not None and self.keep_on_exit is not None:
            self.keep_on_exit(*pending)

    def take_unsaved(self) -> tuple[str, str] | None:
        """(step id, text) typed and not yet handed over; the caller keeps it (used on exit)."""
        pending, self._unsaved = self._unsaved, None
        if pending is not None:
            self._note_loaded = pending[1]
        return pending

    @on(Button.Pressed, "#step-run")
    def _run(self, event: Button.Pressed) -> None:
        event.stop()
        if self.step is not None:
            self.post_message(self.RunPressed(self, self.step.id))

    @on(Button.Pressed, "#step-verify")
    def _verify(self, event: Button.Pressed) -> None:
        event.stop()
        if self.step is not None:
            self.post_message(self.VerifyPressed(self, self.step.id))

    @on(Button.Pressed, "#step-measure")
    def _measure(self, event: Button.Pressed) -> None:
        event.stop()
        if self.step is not None:
            self.post_message(self.MeasurePressed(self, self.step.id))

    @on(Button.Pressed, "#step-save")
    def _save(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_save_note()
