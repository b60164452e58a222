"""bench/goodput_runs.py: the median and range bench/goodput.py prints per configuration, and the
verdict that compares medians (issue 49: one run per launcher cannot say who is ahead)."""

from __future__ import annotations

import pytest

from bench.goodput_runs import spread, summary_cells, verdict


def test_the_median_is_the_middle_run_not_the_mean_and_the_range_is_min_to_max():
    # one hung restart (0.220) drags a mean to 0.545 but not the median
    figure = spread([0.708, 0.220, 0.706])
    assert (figure.median, figure.low, figure.high) == (0.706, 0.220, 0.708)
    assert figure.text(3) == "0.706 (0.220-0.708)"
    assert spread([0.9, 0.8]).median == pytest.approx(0.85)  # an even count: the two middle ones


def test_one_run_or_equal_runs_print_the_figure_alone():
    assert spread([0.951]).text(3) == "0.951"
    assert spread([2.0, 2.0]).text(1) == "2.0"


def test_no_runs_is_refused():
    with pytest.raises(ValueError):
        spread([])


def test_each_column_is_summed_up_over_the_runs_with_its_own_digits():
    runs = [{"goodput": 0.95, "kills": 2}, {"goodput": 0.93, "kills": 2}, {"goodput": 0.96, "kills": 2}]
    assert summary_cells(runs, [("goodput", 3), ("kills", 0)]) == ["0.950 (0.930-0.960)", "2"]


def test_the_verdict_compares_medians_and_says_by_how_much():
    said = verdict("tiny", {"trainer": [0.94, 0.951, 0.96], "torchrun-c10d": [0.75, 0.741, 0.20],
                            "ray": [0.65, 0.60, 0.651]})
    assert said == "tiny: trainer median 0.951 (0.940-0.960), ahead of torchrun-c10d by 0.210, ray by 0.301"


def test_the_verdict_says_plainly_when_the_trainer_is_not_ahead():
    # the best single run of the peer (0.97) beats the trainer's; its median does too
    said = verdict("tiny", {"trainer": [0.90, 0.95], "torchrun-c10d": [0.80], "ray-warm": [0.97, 0.96, 0.10]})
    assert said.startswith("tiny: trainer median 0.925 (0.900-0.950), ahead of torchrun-c10d by 0.125; ")
    assert said.endswith("NOT ahead of ray-warm (its median 0.960, 0.035 higher or equal)")


def test_a_verdict_with_no_peer_says_so():
    assert verdict("1gb", {"trainer": [0.964]}) == "1gb: trainer median 0.964 (no peer measured)"
