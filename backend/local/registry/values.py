"""Copies of stored objects. Objects are JSON values (dicts, lists, strings, numbers, booleans,
None) that the store shares and never changes in place, so every read and write copies them;
with managedFields an object holds several times its own fields in nested dicts, and
copy.deepcopy's per-node bookkeeping made those copies most of a write's cost. A pickle round
trip copies the same values in C, about five times faster (bench/registry_writes.py).
"""

from __future__ import annotations

import pickle
from typing import TypeVar

T = TypeVar("T")


def copied(value: T) -> T:
    """A deep copy of a JSON value."""
    return pickle.loads(pickle.dumps(value, pickle.HIGHEST_PROTOCOL))
