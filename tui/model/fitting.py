"""The one rule for every bar and border that holds several fields on one line (the job bar, the
footer's keys, the step card): each field has a priority; while the line is too long the field
of lowest priority goes, whole (of equals, the later first); the first and the last field never
go. Nothing is cut mid-word here: a field that must be read whole and may be long (a call to
action, a reason) does not belong on a one-line bar, it wraps in its card. Only a name may lose
its middle (`format.fit`), and that is the caller's choice, after this."""

from __future__ import annotations

from typing import Callable, Sequence, TypeVar

T = TypeVar("T")


def fit_fields(fields: Sequence[T], width: int, cells: Callable[[T], int],
               priority: Callable[[T], float], keep_ends: bool = True) -> list[T]:
    """The fields, in their order, that fit in `width` cells (see the module's docstring); the
    first and last are kept even where they alone are wider, unless `keep_ends` is False (a bar
    whose ends are ranked like the rest)."""
    total = sum(cells(field) for field in fields)
    ends = 1 if keep_ends else 0
    middle = sorted(range(ends, len(fields) - ends), key=lambda i: (priority(fields[i]), -i))
    dropped: set[int] = set()
    for i in middle:
        if total <= width:
            break
        dropped.add(i)
        total -= cells(fields[i])
    return [field for i, field in enumerate(fields) if i not in dropped]
