"""The lesson engine: the 15 steps as data, their run actions and verifies, progress and notes.
The API the TUI and the CLI use is `backend.lesson.engine.Lesson`."""
