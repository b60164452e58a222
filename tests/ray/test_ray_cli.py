"""training.ray_train refuses bad arguments in one line (exit 2) before starting any Ray; a
restarted worker group is told apart by its repeated start lines."""

from __future__ import annotations

import functools
from pathlib import Path


from backend.raytrain.groups import WorkerGroups
from tests.ray.conftest import run_cli
from training import ray_train

PREFIX = "training.ray_train: error: "


def _refused(capsys, *args: str) -> str:
    """training.ray_train.main in this process (torch loads once): exit 2 and one line."""
    try:
        code = ray_train.main(list(args))
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(PREFIX), err
    return lines[0].removeprefix(PREFIX)


def test_the_command_refuses_bad_arguments_in_one_line(tmp_path):
    result = run_cli("--storage", str(tmp_path / "vol"), "--num-workers", "0", module="training.ray_train")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [PREFIX + "--num-workers must be at least 1, got 0"]


def test_bad_arguments_get_one_line_and_exit_2(tmp_path, capsys):
    storage = str(tmp_path / "vol")
    refused = functools.partial(_refused, capsys)
    assert refused("--storage", storage, "--num-workers", "0") == "--num-workers must be at least 1, got 0"
    assert refused("--storage", storage, "--steps", "0") == "--steps must be at least 1, got 0"
    assert refused("--storage", storage, "--report-every", "0") == "--report-every must be at least 1, got 0"
    assert refused("--steps", "3").startswith("the following arguments are required: --storage")

    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    assert refused("--storage", str(blocker / "vol")).startswith(f"cannot write to --storage {blocker}")

    (tmp_path / "vol" / "taken").mkdir(parents=True)
    assert refused("--storage", storage, "--name", "taken").startswith(
        f"run 'taken' already exists in {tmp_path / 'vol'} (Ray Train would resume it)")

    long_temp = "/tmp/" + "x" * 60
    assert refused("--storage", storage, "--temp-dir", long_temp).startswith(f"--temp-dir {long_temp} is 65 characters")

    assert refused("--storage", storage, "--samples", "8").startswith("--samples 8 is too small for 2 worker(s)")
    assert not list(Path(storage).glob("ray-*")), "a refused run left a run directory"


def test_worker_groups_are_told_apart_by_repeated_start_lines():
    """The pods of a restarted group get the next restart attempt (lines as the driver prints
    them: ranks in any order, the old group's pids replaced)."""
    groups = WorkerGroups()
    for rank, pid in ((1, 101), (0, 100), (0, 200), (1, 201), (1, 301), (0, 300)):
        groups.started(rank, pid)
        if pid == 100:
            assert (groups.current, groups.attempt) == ({1: 101, 0: 100}, 0)
        if pid == 201:
            assert (groups.current, groups.attempt) == ({0: 200, 1: 201}, 1)
    assert (groups.current, groups.attempt) == ({1: 301, 0: 300}, 2)
