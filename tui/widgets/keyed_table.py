"""A DataTable refreshed by key: rows that are new are added, changed cells are updated, rows that
went away are removed. Nothing is rebuilt, so the cursor stays on the row the learner chose, and a
changed cell is repainted alone: DataTable's update_cell repaints the whole table (every row and
the empty space below them), which, a few cells a training step, was most of what following a job
wrote to the terminal (bench/tui_bytes.py).

A cell given as a str is shown as plain text (DataTable would read it as markup): what a table
shows is the cluster's (names, reasons, runs), not the cockpit's markup."""

from __future__ import annotations

from typing import Any, Mapping, Self

from rich.text import Text
from textual.coordinate import Coordinate
from textual.geometry import Region
from textual.widgets import DataTable


class KeyedTable(DataTable):
    # (key, header, width): a width of None is as wide as the column's widest value
    def __init__(self, columns: tuple[tuple[str, str, int | None], ...], **kwargs) -> None:
        kwargs.setdefault("cursor_type", "row")
        self._cells_only = False  # within sync: update_cell's repaint of everything is skipped
        super().__init__(**kwargs)
        self._column_spec = columns
        self._rows: dict[str, tuple[Any, ...]] = {}

    def on_mount(self) -> None:
        if not self.columns:  # a subclass may have laid them out already
            self.set_columns(self._column_spec)

    def set_columns(self, columns: tuple[tuple[str, str, int | None], ...]) -> None:
        """Show these columns instead (a layout change): the table is emptied; sync() refills it."""
        self._column_spec = columns
        self._rows.clear()
        self.clear(columns=True)
        for key, header, width in columns:
            self.add_column(header, key=key, width=width)

    @property
    def keys(self) -> list[str]:
        return list(self._rows)

    @property
    def selected_key(self) -> str | None:
        if not self._rows or not (0 <= self.cursor_row < self.row_count):
            return None
        row_key, _ = self.coordinate_to_cell_key((self.cursor_row, 0))
        return row_key.value

    def sync(self, rows: Mapping[str, tuple[Any, ...]]) -> bool:
        """Make the table show exactly `rows` (key → cells in column order), in that order for new
        keys; only changed cells are written. Whether rows came or went (a sorted table re-sorts)."""
        changed = any(k not in rows for k in self._rows) or any(k not in self._rows for k in rows)
        for gone in [k for k in self._rows if k not in rows]:
            del self._rows[gone]
            self.remove_row(gone)
        column_keys = [key for key, _, _ in self._column_spec]
        changed_cells: list[tuple[str, str]] = []
        self._cells_only = True
        try:
            for key, cells in rows.items():
                cells = tuple(Text(cell) if isinstance(cell, str) else cell for cell in cells)
                old = self._rows.get(key)
                if old is None:
                    self.add_row(*cells, key=key)
                else:
                    for column, before, after in zip(column_keys, old, cells):
                        if not _same(before, after):
                            self.update_cell(key, column, after)
                            changed_cells.append((key, column))
                self._rows[key] = cells
        finally:
            self._cells_only = False
        for key, column in changed_cells:
            self.refresh_coordinate(Coordinate(self.get_row_index(key), self.get_column_index(column)))
        return changed

    def refresh(self, *regions: Region, **kwargs: Any) -> Self:
        if self._cells_only and not regions and not kwargs:
            return self  # update_cell's repaint of everything: sync repaints the cells it changed
        return super().refresh(*regions, **kwargs)


def _same(before: Any, after: Any) -> bool:
    """Cell equality that sees style: rich's Text == compares the text and spans only, and a row
    that turns dim must be redrawn."""
    if isinstance(before, Text) and isinstance(after, Text):
        return before.plain == after.plain and before.style == after.style and before.spans == after.spans
    return before == after
