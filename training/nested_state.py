"""The tensors of a nested training state (dicts, lists and tuples of tensors and plain values),
in one fixed order: what a save copies, and what the memory tier sends rank to rank."""

from __future__ import annotations

import torch


def tensors(obj) -> list[torch.Tensor]:
    """Every tensor of a nested state, depth first in insertion order."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        return [t for value in obj.values() for t in tensors(value)]
    if isinstance(obj, (list, tuple)):
        return [t for value in obj for t in tensors(value)]
    return []


def replace_tensors(obj, replacements):
    """The same nested state with each tensor taken, in `tensors` order, from `replacements`."""
    if isinstance(obj, torch.Tensor):
        return next(replacements)
    if isinstance(obj, dict):
        return {key: replace_tensors(value, replacements) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(replace_tensors(value, replacements) for value in obj)
    return obj
