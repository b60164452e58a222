"""A container run's shim (backend/local/node/shim.py), as containerd's runtime v2 shim: the
run's parent, not the kubelet's process, so the run outlives whoever started it; it writes the
run's log and records its exit, and a new kubelet adopts the run from what it recorded (upstream:
the kubelet re-lists its runtime's containers at start, pkg/kubelet/kuberuntime
kubeGenericRuntimeManager.GetPods, instead of assuming them gone)."""

from __future__ import annotations

import asyncio
import json
import os
import sys

from backend.local.node import shim
from backend.local.node.container import LOST_NOTE, Container
from backend.inotify import FileWatcher
from backend.local.node.logs import FollowedLog, read_lines
from backend.local.node.podspec import LaunchSpec, base_env
from backend.processes import Children, start_time

PY = sys.executable
# Prints two lines, waits for the test to say go (a FIFO), prints three more and exits 3.
_SCRIPT = ("import sys\nprint('line 1', flush=True)\nprint('line 2', flush=True)\nopen(sys.argv[1]).read()\n"
           "for i in (3, 4, 5):\n    print(f'line {i}', flush=True)\nsys.exit(3)")


async def _until_printed(log: FollowedLog, text: str) -> None:
    while not any(t == text for _s, t, _e in read_lines(log.path, 0, log.path.stat().st_size)):
        log.changed.clear()
        await log.changed.wait()


async def test_a_run_outlives_its_starter_and_is_adopted_with_its_whole_log(tmp_path):
    children = Children()
    children.install()
    files = FileWatcher()
    go = tmp_path / "go"
    os.mkfifo(go)
    path = tmp_path / "main" / "0.log"
    try:
        first = Container("pod-uid", "cluster-id", FollowedLog(path, files))
        await first.start(LaunchSpec([PY, "-c", _SCRIPT, str(go)], base_env()), children.exit_of)
        await asyncio.wait_for(_until_printed(first.log, "line 2"), 60)

        # Its starter is gone (as a controller SIGKILLed): a new one finds the run by its record.
        record = shim.live_record(path)
        assert record is not None and record["pid"] == first.pid
        adopted = Container("pod-uid", "cluster-id", FollowedLog(path, files))
        adopted.adopt(record, shim.recorded_status(path))
        assert adopted.pid == first.pid and not adopted.exit.done()
        await asyncio.to_thread(lambda: go.write_text("go"))
        status = await asyncio.wait_for(adopted.ended(), 60)
    finally:
        children.uninstall()

    assert os.waitstatus_to_exitcode(status) == 3 and adopted.note == ""
    texts = [t for _s, t, _e in read_lines(path, 0, path.stat().st_size)]
    assert texts == [f"line {i}" for i in range(1, 6)]  # each once, in order, written by the shim
    assert adopted.log.last_lines == texts[-5:]
    # Ended: its shim is gone, the status it recorded is what the next one finds.
    assert shim.live_record(path) is None and shim.recorded_status(path) == status
    ended = Container("pod-uid", "cluster-id", FollowedLog(path, files))
    ended.adopt(None, shim.recorded_status(path))
    assert await asyncio.wait_for(ended.ended(), 60) == status
    files.close()


async def test_a_reused_pid_is_not_taken_for_a_shim_and_a_run_that_left_nothing_was_lost(tmp_path):
    files = FileWatcher()
    path = tmp_path / "main" / "0.log"
    path.parent.mkdir(parents=True)
    me = os.getpid()  # alive, but started at another time than the record says
    shim.record_path(path).write_text(json.dumps({"shim": me, "start": start_time(me) - 1, "pid": me,
                                                  "started": 0.0, "devices": ""}))
    assert shim.live_record(path) is None

    lost = Container("pod-uid", "cluster-id", FollowedLog(path, files))
    lost.adopt(None, None)
    assert await asyncio.wait_for(lost.ended(), 60) == shim.LOST_STATUS and lost.note == LOST_NOTE
    files.close()
