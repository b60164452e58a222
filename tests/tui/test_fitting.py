"""The one fitting rule (tui/model/fitting.py) and the footer that uses it: whole fields, the lowest
priority first, the ends kept."""

from __future__ import annotations

from tui.model.fitting import fit_fields


def test_the_lowest_priority_goes_whole_and_the_ends_stay():
    fields = [("first", 0), ("a", 5), ("b", 1), ("c", 1), ("last", 0)]
    width = sum(len(name) for name, _ in fields)

    def fit(room: int) -> list[str]:
        return [name for name, _ in fit_fields(fields, room, lambda f: len(f[0]), lambda f: f[1])]

    assert fit(width) == ["first", "a", "b", "c", "last"]
    assert fit(width - 1) == ["first", "a", "b", "last"]  # of equals, the later goes first
    assert fit(width - 2) == ["first", "a", "last"]
    assert fit(3) == ["first", "last"]  # the ends stay even where they alone are wider
