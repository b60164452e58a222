"""Several runs of one configuration, summed up as bench/goodput.py prints them: each figure's median
and range, and the verdict that compares medians. Pure: numbers in, strings out (the bench
measures; tests/goodput/test_bench_runs.py checks the arithmetic and the wording).

One run per configuration cannot say who is ahead: on a loaded machine the same launcher's goodput
moved from 0.708 to 0.220 between two invocations (issue 49), so the verdict reads the median of
the runs and the range is printed beside it.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Spread:
    """One figure over the runs of one configuration."""

    median: float
    low: float
    high: float

    def text(self, digits: int) -> str:
        """`0.951 (0.940-0.960)`; the median alone when every run gave the same figure."""
        median = f"{self.median:.{digits}f}"
        if self.low == self.high:
            return median
        return f"{median} ({self.low:.{digits}f}-{self.high:.{digits}f})"


def spread(values: Sequence[float]) -> Spread:
    if not values:
        raise ValueError("no runs to sum up")
    return Spread(statistics.median(values), min(values), max(values))


def summary_cells(runs: Sequence[Mapping[str, float]], columns: Sequence[tuple[str, int]]) -> list[str]:
    """One cell per (figure, digits) column: that figure's spread over the runs."""
    return [spread([run[name] for run in runs]).text(digits) for name, digits in columns]


def verdict(preset: str, goodputs: Mapping[str, Sequence[float]], ours: str = "trainer") -> str:
    """`tiny: trainer median 0.951 (0.940-0.960), ahead of torchrun-c10d by 0.210, ray by 0.300`,
    with the peers it is not ahead of named apart, median against median."""
    mine = spread(goodputs[ours])
    ahead, behind = [], []
    for launcher, values in goodputs.items():
        if launcher == ours:
            continue
        theirs = spread(values).median
        if mine.median > theirs:
            ahead.append(f"{launcher} by {mine.median - theirs:.3f}")
        else:
            behind.append(f"{launcher} (its median {theirs:.3f}, {theirs - mine.median:.3f} higher or equal)")
    said = f"{preset}: {ours} median {mine.text(3)}"
    if ahead:
        said += ", ahead of " + ", ".join(ahead)
    if behind:
        said += "; NOT ahead of " + ", ".join(behind)
    return said if ahead or behind else said + " (no peer measured)"
