"""`bench/goodput.py --quick` as CI runs it: the lesson's TrainJob on a throwaway embedded cluster,
a SIGKILL of a random worker 10 s in, every worker line fed to the goodput model as it
arrives. The bench must finish, print its table and one row per restart taken apart (failure seen
-> first step), and give a goodput that is a share of the wall time. Its figures are measured, not
asserted: the 0.95 goal is the 1 GB preset's (`bench/goodput.py --presets 1gb`), read on a quiet machine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


REPO = Path(__file__).resolve().parents[2]


def test_the_quick_bench_runs_and_takes_each_restart_apart(tmp_path):
    # one kill 10 s in, not two 20 s apart: the same path through the bench at a third of the time
    done = subprocess.run([sys.executable, str(REPO / "bench" / "goodput.py"), "--quick", "--launchers", "trainer",
                           "--runs", "1", "--kills", "1", "--every", "10"],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    table = [line.split() for line in lines if line.startswith("tiny ")]
    goodput_rows = [row for row in table if len(row) > 2 and row[1] == "trainer" and "." in row[2]]
    restart_rows = [row for row in table if row[1] == "trainer" and row[2].isdigit()]  # PRESET LAUNCHER RUN RESTART
    assert len(goodput_rows) == 1, done.stdout[-3000:]
    assert 0.0 < float(goodput_rows[0][2]) < 1.0
    assert [row[2:4] for row in restart_rows] == [["1", "1"]], done.stdout[-3000:]
    # failure -> first step was seen for each restart, and is longer than the step it replaced
    assert all(float(row[4]) > 0 for row in restart_rows)
    assert lines[-1] == f"tiny: trainer median {goodput_rows[0][2]} (no peer measured)"
