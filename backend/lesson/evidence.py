"""Checks that turn what the workers printed into Evidence. Pure functions over log text, so each
can be tested on a real log and on a tampered one."""

from __future__ import annotations

import ast
import re
import time
from typing import Iterable

from backend.models import Evidence
from backend.quantity import size_text
from training.logfmt import parse_line
from backend.words import count


def clock(epoch: float | None, now: float | None = None) -> str:
    """How evidence spells a moment: "14:03:12" (local time) that day, "Nov 29 14:03:12" before,
    never raw epoch seconds or a long ISO stamp; "-" when it was not recorded."""
    if epoch is None:
        return "-"
    when = time.localtime(epoch)
    today = time.localtime(time.time() if now is None else now)
    if (when.tm_year, when.tm_yday) == (today.tm_year, today.tm_yday):
        return time.strftime("%H:%M:%S", when)
    return time.strftime("%b %d %H:%M:%S", when)


def readable(value: object, key: str = "") -> str:
    """How evidence spells a value, never as a Python repr: a mapping as "cpu: 500m, memory: 1Gi"
    (a nested one as "requests (cpu: 500m)"), a list as "a, b", nothing as "none"; a number of bytes
    (a `*bytes` key) as "1.5 MiB", of seconds (a `*seconds` key) as "12.5 s"."""
    if isinstance(value, dict):
        if not value:
            return "none"
        parts = []
        for k, v in value.items():
            text = readable(v, str(k))
            parts.append(f"{k} ({text})" if isinstance(v, dict) and v else f"{k}: {text}")
        return ", ".join(parts)
    if isinstance(value, (list, tuple, set)):
        return ", ".join(readable(v) for v in value) if value else "none"
    if value is None or value == "":
        return "none"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if key.endswith("bytes"):
            return size_text(value)
        if key.endswith("seconds"):
            return f"{value:.1f} s"
    return str(value)


# A Python dict or list literal inside a line of text (one level of nesting): what evidence saved
# before `readable` spelled its values holds, e.g. "requests {'cpu': '500m'}".
_REPR = re.compile(r"\{(?:[^{}]|\{[^{}]*\})*\}|\[[^\[\]]*'[^\[\]]*\]")


def respelled(text: str) -> str:
    """`text` with every Python dict or list repr in it spelled by `readable`; anything that is
    not a literal (a "[task]" prefix, braces in a message) stays as it is."""
    def spell(found: re.Match) -> str:
        try:
            value = ast.literal_eval(found.group(0))
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return found.group(0)
        if isinstance(value, dict) and len(value) > 1:
            return f"({readable(value)})"  # its commas are not the sentence's
        return readable(value) if isinstance(value, (dict, list)) else found.group(0)

    return _REPR.sub(spell, text) if ("{" in text or "['" in text) else text


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def same_loss_every_step(lines: Iterable[str], source: str) -> Evidence:
    """Step 3: every rank printed a loss at every step, and the printed losses are identical.

    Compares the printed text (six decimals, what a person would compare), not re-parsed floats.
    """
    checked = "every rank printed the same loss at every step"
    losses: dict[int, dict[int, str]] = {}  # rank -> step -> printed loss
    worlds: set[int] = set()
    pids: set[str] = set()
    planned: int | None = None
    for line in lines:
        if "=" not in line:
            continue
        fields = parse_line(line)
        if fields.get("event") == "start":
            planned = _int(fields.get("steps")) or planned
            if fields.get("pid"):
                pids.add(fields["pid"])
        rank, step, world = _int(fields.get("rank")), _int(fields.get("step")), _int(fields.get("world"))
        if "loss" in fields and "event" not in fields and rank is not None and step is not None:
            losses.setdefault(rank, {})[step] = fields["loss"]
            if world is not None:
                worlds.add(world)

    def fail(seen: str, details: list[str] | None = None) -> Evidence:
        return Evidence(ok=False, checked=checked, seen=seen, details=details or [f"log: {source}"],
                        at=time.time())

    if not losses:
        return fail(f"no step lines (step=N loss=X rank=R) in {source}")
    if len(worlds) != 1:
        return fail(f"the workers disagree on the world size: {sorted(worlds)}")
    world = worlds.pop()
    if world < 2:
        return fail(f"only one worker ran (world={world}); the step needs two processes")
    missing_ranks = [r for r in range(world) if r not in losses]
    if missing_ranks:
        return fail(f"rank {', '.join(map(str, missing_ranks))} printed no step lines (world={world})")
    if pids and len(pids) < world:
        return fail(f"{world} ranks but only {count(len(pids), 'process', 'processes')} started; the step needs one "
                    "process per worker")
    reference = losses[0]
    last = max(reference)
    if planned is not None and last < planned:
        return fail(f"the run stopped at step {last} of {planned}")
    for rank in range(world):
        gaps = [s for s in range(1, last + 1) if s not in losses[rank]]
        if gaps:
            return fail(f"rank {rank} printed no loss at step {gaps[0]}"
                        + (f" (and {len(gaps) - 1} more steps)" if len(gaps) > 1 else ""))
    for rank in range(1, world):
        for step in range(1, last + 1):
            if losses[rank][step] != reference[step]:
                return fail(f"at step {step} rank 0 printed loss {reference[step]} but rank {rank} "
                            f"printed {losses[rank][step]}",
                            [f"log: {source}", "DDP all-reduces the loss, so the ranks must agree"])
    ranks = " and ".join(f"rank {r}" for r in range(world)) if world <= 3 else f"all {world} ranks"
    details = [f"log: {source}", f"final loss {reference[last]}"]
    if pids:
        details.append(f"{len(pids)} processes (pids {', '.join(sorted(pids))})")
    return Evidence(ok=True, checked=checked, at=time.time(),
                    seen=f"{ranks} printed the same loss at all {last} steps", details=details)
