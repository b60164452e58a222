"""The Textual app: a thin shell that holds the session (cluster + lesson), the preferences and
the theme, opens the cockpit screen, and lists every action in the command palette."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

from textual.app import App, SystemCommand
from textual.screen import Screen

from tui.launch import ERRORS_LOG, THEMES, Launch
from tui.screens.cockpit import CockpitScreen
from tui.model.session import Session

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel

    from backend.settings import Settings
    from tui.config import CockpitConfig


class CockpitApp(App):
    CSS_PATH = Path(__file__).parent / "cockpit.tcss"  # absolute: subclasses live elsewhere
    TITLE = "kfcockpit"
    # Wider terminals (and projectors at small font sizes) get a wider checklist.
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide")]

    def __init__(self, launch: Launch, clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.launch = launch
        self.config: "CockpitConfig | None" = launch.config  # validated after the first paint
        self.clock = launch.clock or clock
        self.session = Session(launch.make_settings, launch.platform, launch.connect)
        self.theme = THEMES[launch.theme]

    @property
    def settings(self) -> "Settings":
        """The validated settings (built by the session after the first paint)."""
        return self.session.settings

    async def load_preferences(self) -> "CockpitConfig":
        """The validated preferences (pydantic), loaded in a thread once the first frame is up;
        command-line flags win over the file."""
        if self.config is None:
            from tui.config import CockpitConfig

            config, problem = await asyncio.to_thread(CockpitConfig.load, self.launch.home)
            if self.launch.theme_override:
                config.theme = self.launch.theme_override
            config.mouse = config.mouse and self.launch.mouse
            self.config = config
            if problem:
                self.notify(problem, title="preferences", severity="warning")
            self.theme = config.textual_theme  # differs from the first frame's only if the file was bad
        return self.config

    def notify(self, message: str, *, title: str = "", severity: "SeverityLevel" = "information",
               timeout: float | None = None, markup: bool = False) -> None:
        """Every notification is plain text, whoever asks (a widget's notify asks for markup):
        what one says comes from the cluster, a log, a note or an error, never from markup."""
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=False)

    def action_help_quit(self) -> None:
        """ctrl+c: Textual's own hint is markup, and notifications here are plain text."""
        self.notify("press q to quit (ctrl+c copies in a text box)", title="Do you want to quit?")

    def get_default_screen(self) -> Screen:
        return CockpitScreen(self.session, self.launch.home / ERRORS_LOG, self.clock, follow=self.launch.follow)

    async def on_unmount(self) -> None:
        from backend.errors import USER_ERRORS

        try:
            await self.session.close()
        except USER_ERRORS:  # leaving anyway; the controller keeps the jobs
            pass

    def action_toggle_theme(self) -> None:
        if self.config is None:  # the preferences arrive a blink after the first frame
            return
        self.config.theme = "light" if self.config.theme == "dark" else "dark"
        self.theme = self.config.textual_theme
        try:
            self.config.save(self.launch.home)
        except OSError as exc:
            self.notify(f"theme not remembered: {exc}", severity="warning")

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        if isinstance(screen, CockpitScreen):
            for title, description, callback in screen.commands():
                yield SystemCommand(title, description, callback)
        yield from super().get_system_commands(screen)


def run_cockpit(launch: Launch) -> int:
    from tui.hangup import leave_on_hangup

    app = CockpitApp(launch)
    leave_on_hangup()
    app.run(mouse=launch.mouse)
    return app.return_code or 0
