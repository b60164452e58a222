"""The preferences file's name and the themes it may name: read by `tui.launch` before pydantic
loads and by `tui.config` after, so both import them from here (dependency-free)."""

PREFERENCES_FILE = "cockpit.json"
THEMES = {"dark": "textual-dark", "light": "textual-light"}
