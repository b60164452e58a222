"""A pod's own PID namespace (backend/local/node/pidns.py), with real runs below their shims:
a pod sees only its own processes, so another pod's root is not there to open through
/proc/PID/root (found: a pod of one namespace could read another's volume that way, issue 44);
and the kubelet sees the run as before: the worker's pid on this machine, its wait status, a
SIGTERM that ends it at once (the worker is not its namespace's PID 1, which would ignore it)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import pytest

from backend.local.node import confine, pidns
from backend.local.node.container import Container
from backend.inotify import FileWatcher
from backend.local.node.logs import FollowedLog, read_lines
from backend.local.node.podspec import ENV_CLUSTER, ENV_POD, LaunchSpec, base_env
from backend.processes import Children

PY = sys.executable
# Pod B's probe: its pid, what its /proc lists, and what it gets opening pod A's files through
# /proc/A/root and the machine's through its PID 1's root.
_PROBE = """
import json, os, sys
def attempt(path):
    try:
        return open(path).read() and "read"
    except OSError as exc:
        return type(exc).__name__
print(json.dumps({"pid": os.getpid(), "proc": sorted(int(e) for e in os.listdir("/proc") if e.isdigit()),
                  "tries": {path: attempt(path) for path in sys.argv[1:]}}))
"""


@pytest.fixture
async def runs(tmp_path):
    """Start runs below their shims (cold: exec'd), each a pod of its own namespace with a volume
    at /data, in a PID namespace of its own unless told not to; what started them is cleaned."""
    if why := confine.available() or pidns.available():
        pytest.skip(f"no mount and PID namespace for a pod here: {why}")
    children = Children()
    files = FileWatcher()
    started: list[Container] = []

    async def start(name: str, argv: list[str], own_pids: bool = True) -> Container:
        if not started:
            children.install()
        volume, top = tmp_path / "volumes" / name, tmp_path / "roots" / name
        volume.mkdir(parents=True)
        top.mkdir(parents=True)
        env = {**base_env(), ENV_CLUSTER: "cluster-id", ENV_POD: f"uid-{name}"}  # the pod's marker
        spec = LaunchSpec(argv, env, confine={"root": str(top), "mounts": [["/data", str(volume), False]],
                                                     "hide": [], "cwd": "/", "pid_namespace": own_pids})
        run = Container(f"uid-{name}", "cluster-id", FollowedLog(tmp_path / "logs" / name / "0.log", files))
        started.append(run)
        await run.start(spec, children.exit_of)
        assert run.pid is not None, run.start_error
        return run

    yield start
    for run in started:
        run.kill()
    if started:
        children.uninstall()
    files.close()


async def _until_printed(log: FollowedLog, text: str) -> None:
    while not any(t == text for _s, t, _e in read_lines(log.path, 0, log.path.stat().st_size)):
        log.changed.clear()
        await log.changed.wait()


def _printed(run: Container) -> list[str]:
    return [t for _s, t, _e in read_lines(run.log.path, 0, run.log.path.stat().st_size)]


@pytest.mark.parametrize("own_pids", [True, False])
async def test_a_pod_sees_only_its_own_processes_and_not_another_pods_root(runs, tmp_path, own_pids):
    waiting = await runs("a", ["sh", "-c", "echo secret > /data/secret; mkfifo /data/go; echo ready; cat /data/go"],
                         own_pids)
    await asyncio.wait_for(_until_printed(waiting.log, "ready"), 60)
    targets = [f"/proc/{waiting.pid}/root/data/secret", "/proc/1/root/etc/hostname"]
    probe = await runs("b", [PY, "-c", _PROBE, *targets], own_pids)
    status = await asyncio.wait_for(probe.ended(), 60)
    seen = json.loads(_printed(probe)[-1])
    await asyncio.to_thread((tmp_path / "volumes" / "a" / "go").write_text, "")
    assert os.waitstatus_to_exitcode(await asyncio.wait_for(waiting.ended(), 60)) == 0
    assert os.waitstatus_to_exitcode(status) == 0
    if not own_pids:  # what a pod could do before: its pid and /proc are the machine's
        assert seen["pid"] == probe.pid and waiting.pid in seen["proc"]
        assert seen["tries"][targets[0]] == "read"
        return
    # Its pause is PID 1, it is PID 2: nothing else, pod A's pid is not there to name, and the
    # pause's root (the machine's) is not to be looked into.
    assert seen["pid"] == 2 and seen["proc"] == [1, 2]
    assert seen["tries"] == {targets[0]: "FileNotFoundError", targets[1]: "PermissionError"}


async def test_the_kubelet_sees_the_worker_as_without_a_namespace(runs):
    """The pid the kubelet knows is the worker's on this machine (the namespace's PID 2), a
    SIGTERM to its group ends `sleep` at once (as PID 1 it would ignore it and wait out the grace
    period), a SIGKILL reads 137, an exit code is the worker's; nothing of the runs is left."""
    sleeping = await runs("sleep", ["sleep", "600"])
    nspid = [line for line in Path(f"/proc/{sleeping.pid}/status").read_text().splitlines()
             if line.startswith("NSpid:")]
    assert nspid == [f"NSpid:\t{sleeping.pid}\t2"]
    sleeping.terminate()
    assert await asyncio.wait_for(sleeping.ended(), 60) == signal.SIGTERM

    killed = await runs("killed", ["sleep", "600"])
    killed.kill()
    assert os.waitstatus_to_exitcode(await asyncio.wait_for(killed.ended(), 60)) == -signal.SIGKILL

    exits = await runs("exits", ["sh", "-c", "sleep 600 & exit 3"])  # leaves a child: ended with the pod
    assert os.waitstatus_to_exitcode(await asyncio.wait_for(exits.ended(), 60)) == 3
    leftovers = [p for p in os.listdir("/proc") if p.isdigit() and _environ_has(int(p), "uid-exits")]
    assert leftovers == []


def _environ_has(pid: int, pod: str) -> bool:
    try:
        return f"KFCOCKPIT_POD={pod}".encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


async def test_the_pause_reaps_the_namespaces_orphans(runs):
    """An orphan goes to its namespace's PID 1, the pause: reaped there, its pid is gone at once
    (a zombie nobody reaps would stay in /proc, and in the pod's pids limit, until the pod ends;
    then this run would not end, and wait_for says so)."""
    script = ("import os\n"
              "read_end, write_end = os.pipe()\n"
              "child = os.fork()\n"
              "if child == 0:\n"
              "    grandchild = os.fork()\n"
              "    if grandchild == 0:\n"
              "        os._exit(0)\n"
              "    os.write(write_end, f'{grandchild}\\n'.encode())\n"
              "    os._exit(0)\n"
              "os.close(write_end)\n"
              "orphan = int(os.read(read_end, 32))\n"
              "os.waitpid(child, 0)\n"
              "while os.path.exists(f'/proc/{orphan}'):  # ends once PID 1 reaped it\n"
              "    pass\n"
              "print('reaped', orphan)\n")
    run = await runs("orphans", [PY, "-c", script])
    status = await asyncio.wait_for(run.ended(), 60)
    assert os.waitstatus_to_exitcode(status) == 0 and _printed(run)[-1].startswith("reaped ")
