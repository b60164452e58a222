"""The Textual app: a thin shell that holds the session (cluster + lesson), the preferences and
the theme, opens the cockpit screen, and lists every action in the command palette."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

from textual.app import App, SystemCommand
from textual.screen import Screen

from tui.config import CockpitConfig
from tui.screens.cockpit import CockpitScreen
from tui.session import Session

if TYPE_CHECKING:
    import argparse

    from backend.settings import Settings


class CockpitApp(App):
    CSS_PATH = Path(__file__).parent / "cockpit.tcss"  # absolute: subclasses live elsewhere
    TITLE = "kfcockpit"
    # Wider terminals (and projectors at small font sizes) get a wider checklist.
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide")]

    def __init__(self, settings: "Settings", config: CockpitConfig | None = None,
                 clock: Callable[[], float] = time.time, config_problem: str | None = None) -> None:
        super().__init__()
        self.settings = settings
        self.config = config or CockpitConfig()
        self.clock = clock
        self.session = Session(settings)
        self.config_problem = config_problem
        self.theme = self.config.textual_theme

    def get_default_screen(self) -> Screen:
        return CockpitScreen(self.session, self.config, self.clock)

    def on_mount(self) -> None:
        if self.config_problem:
            self.notify(self.config_problem, title="preferences", severity="warning")

    async def on_unmount(self) -> None:
        try:
            await self.session.close()
        except Exception:  # leaving anyway; the controller keeps the jobs
            pass

    def action_toggle_theme(self) -> None:
        self.config.theme = "light" if self.config.theme == "dark" else "dark"
        self.theme = self.config.textual_theme
        try:
            self.config.save(self.settings.home)
        except OSError as exc:
            self.notify(f"theme not remembered: {exc}", severity="warning")

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        if isinstance(screen, CockpitScreen):
            for title, help, callback in screen.commands():
                yield SystemCommand(title, help, callback)
        yield from super().get_system_commands(screen)


def run_cockpit(args: "argparse.Namespace") -> int:
    from tui.cli.common import settings_from

    settings = settings_from(args)
    config, problem = CockpitConfig.load(settings.home)
    if getattr(args, "theme", None):
        config.theme = args.theme
    if getattr(args, "no_mouse", False):
        config.mouse = False
    app = CockpitApp(settings, config, config_problem=problem)
    app.run(mouse=config.mouse)
    return app.return_code or 0
