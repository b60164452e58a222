"""node/confine.py in a forked child, as a pod's process uses it: the pod's mounts at their
mountPaths (made without creating anything on the machine), read-only where asked, the hidden
paths empty and no capability left to undo that (containerd's default set, defaultUnixCaps); with
node/pidns.py, a /proc of the pod's own processes; as root, and as an unprivileged user inside a
user namespace of its own."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

import pytest

from backend.local.node import confine, pidns

NOBODY = 65534


@pytest.fixture
def state():
    """A state root and a volume any user may read (tmp_path's parents are root's alone)."""
    top = Path(tempfile.mkdtemp(prefix="kfcockpit-confine-", dir="/tmp"))
    os.chmod(top, 0o755)
    (top / "state" / "volumes" / "data").mkdir(parents=True)
    (top / "state" / "pki").mkdir()
    (top / "state" / "pki" / "token").write_text("admin")
    (top / "state" / "volumes" / "data" / "x").write_text("on the volume")
    (top / "state" / "app.yaml").write_text("steps: 3")
    (top / "root").mkdir()
    for path in top.rglob("*"):
        os.chmod(path, 0o777 if path.is_dir() else 0o666)
    yield top
    shutil.rmtree(top)


def _forked(uid: int | None, look: Callable[[], dict]) -> dict:
    """What `look` returns, run in a forked child (as `uid`, if given)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            if uid is not None:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
                # A uid change makes a process non-dumpable, its /proc/self files root's: a user's
                # own process (a controller started by them) is dumpable.
                ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE
            seen = look()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            import traceback

            seen = {"error": "".join(traceback.format_exception(exc))}
        os.write(write_fd, json.dumps(seen).encode())
        os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd) as pipe:
        seen = json.loads(pipe.read())
    os.waitpid(pid, 0)
    return seen


def _in_pod(state: Path, uid: int | None) -> dict:
    """What a process confined by the plan below sees; run in a forked child (as `uid`)."""
    parent = os.getpid()

    def look() -> dict:
        confine.enter({"root": str(state / "root"), "cwd": "/",
                       "mounts": [["/kfcockpit-test-ckpt", str(state / "state" / "volumes" / "data"), False],
                                  ["/etc/kfcockpit-test/app.yaml", str(state / "state" / "app.yaml"), True]],
                       "hide": [str(state / "state")]})
        seen = {"volume": open("/kfcockpit-test-ckpt/x").read(),
                "config": open("/etc/kfcockpit-test/app.yaml").read(),
                "state": os.listdir(state / "state"), "passwd": os.path.exists("/etc/passwd")}
        open("/kfcockpit-test-ckpt/y", "w").write("written")
        # What a pod that sets out to reach the state would try: undo the mount that hides
        # it, or look through the root of a process outside (the controller's).
        seen["umount"] = ctypes.CDLL(None, use_errno=True).umount2(str(state / "state").encode(), 2) == 0
        seen["through /proc"] = _opens(f"/proc/{parent}/root{state}/state/pki/token")
        seen["read_only"] = not _opens("/etc/kfcockpit-test/app.yaml", "w")
        return seen
    return _forked(uid, look)


def _opens(path: str, mode: str = "r") -> bool:
    try:
        open(path, mode).close()
        return True
    except OSError:
        return False


@pytest.mark.parametrize("who", ["this user", "unprivileged"])
def test_a_confined_process_sees_its_mounts_and_not_the_state(state, who):
    uid = None
    if who == "unprivileged":
        if os.geteuid() != 0:
            uid = None  # already unprivileged: the user namespace is what is tested
        else:
            uid = NOBODY
    elif os.geteuid() != 0:
        pytest.skip("not root")
    if why := confine.available():
        pytest.skip(f"this kernel gives no mount namespace here: {why}")
    seen = _in_pod(state, uid)
    assert seen == {"volume": "on the volume", "config": "steps: 3", "state": [], "passwd": True,
                    "read_only": True, "umount": False, "through /proc": False}, seen
    assert (state / "state" / "volumes" / "data" / "y").read_text() == "written"
    assert not Path("/kfcockpit-test-ckpt").exists() and not Path("/etc/kfcockpit-test").exists()


def _in_own_pids(state: Path, uid: int | None) -> dict:
    """What a pod's process sees when started as its shim starts it in a PID namespace of its own
    (node/pidns.py: the pause forked first, then the worker, confined); run as `uid`."""
    def worker() -> dict:
        confine.enter({"root": str(state / "root"), "cwd": "/", "hide": [str(state / "state")], "mounts": [],
                       "pid_namespace": True})
        return {"pid": os.getpid(), "through /proc/1/root": _opens("/proc/1/root/etc/hostname"),
                "proc": sorted(int(e) for e in os.listdir("/proc") if e.isdigit())}

    def shim() -> dict:
        pidns.enter()
        pause, held = pidns.start_pause()
        try:
            return _forked(None, worker)
        finally:
            pidns.end(pause)
            os.waitpid(pause, 0)
    return _forked(uid, shim)


@pytest.mark.parametrize("who", ["this user", "unprivileged"])
def test_a_pod_in_a_pid_namespace_of_its_own_sees_only_its_processes(state, who):
    """Another pod's root through /proc/PID/root (issue 44) needs its pid: a pod's /proc is its
    own namespace's (its pause, PID 1, and itself); the pause's root, the machine's, stays shut."""
    uid = NOBODY if who == "unprivileged" and os.geteuid() == 0 else None
    if who == "this user" and os.geteuid() != 0:
        pytest.skip("not root")
    if why := confine.available() or pidns.available():
        pytest.skip(f"this kernel gives no PID namespace here: {why}")
    assert _in_own_pids(state, uid) == {"pid": 2, "proc": [1, 2], "through /proc/1/root": False}
