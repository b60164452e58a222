"""logfmt lines: what every worker prints and what the cockpit parses.

`step=12 loss=0.083650 rank=0 world=2` — one line per step per rank, plus `event=...` lines.
A rank's `event=start` line ends with where it sits: `node_rank=N local_rank=L local_world=K`
(its pod, its place among the pod's K ranks; rank = N*K + L under torchrun) and `gpu=G` when it
was given a GPU (real, or simulated by the embedded cluster).
No torch here: the cockpit parses these in its own process.
"""

from __future__ import annotations

import re

_PAIR = re.compile(r'([A-Za-z_][A-Za-z0-9_.\-]*)=("(?:[^"\\]|\\.)*"|\S*)')


def _quote(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.6f}"
    text = str(value)
    if text == "" or any(c in text for c in ' "=\t'):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def format_line(**fields: object) -> str:
    """Fields in the order given; floats with 6 decimals (all ranks print identical text)."""
    return " ".join(f"{key}={_quote(value)}" for key, value in fields.items())


def parse_line(line: str) -> dict[str, str]:
    """Every key=value pair of a line; text that is not a pair is ignored."""
    fields: dict[str, str] = {}
    for key, raw in _PAIR.findall(line):
        if raw.startswith('"') and raw.endswith('"') and len(raw) >= 2:
            raw = re.sub(r"\\(.)", r"\1", raw[1:-1])
        fields[key] = raw
    return fields


def step_and_loss(line: str) -> tuple[int, float] | None:
    """(step, loss) when the line is a training-step line, else None. Cheap on other lines."""
    if "step=" not in line or "loss=" not in line:
        return None
    fields = parse_line(line)
    try:
        return int(fields["step"]), float(fields["loss"])
    except (KeyError, ValueError):
        return None
