"""Choose the job whose pods and logs the cockpit follows."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from tui.model import format as fmt

if TYPE_CHECKING:
    from backend.models import JobSummary


class PickJobScreen(ModalScreen[str | None]):
    BINDINGS = [Binding("escape,q", "cancel", "Cancel")]

    def __init__(self, jobs: list["JobSummary"], current: str | None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.jobs = sorted(jobs, key=lambda j: j.created, reverse=True)
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="dialog"):
            yield Static("Follow which job?", id="question")
            options = []
            for job in self.jobs:
                phase = job.phase.value
                options.append(Option(Content.assemble(
                    ("● " if job.name == self.current else "  "), (job.name, "bold"), "  ",
                    (phase, fmt.JOB_PHASE_STYLE.get(phase, "")),
                    f"  {job.num_nodes} nodes · attempt {job.restart_attempt}"), id=job.name))
            yield OptionList(*options, id="jobs")
            yield Static("enter follows · escape cancels", classes="dim")

    def on_mount(self) -> None:
        jobs = self.query_one("#jobs", OptionList)
        if self.current and any(j.name == self.current for j in self.jobs):
            jobs.highlighted = jobs.get_option_index(self.current)

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)
