"""`python -m tui`: the same as `kfcockpit` (textual-serve starts the cockpit this way)."""

from tui.cli import run

run()
