"""node/confine.py in a forked child, as a pod's process uses it: the pod's mounts at their
mountPaths (made without creating anything on the machine), read-only where asked, the hidden
paths empty and no capability left to undo that (containerd's default set, defaultUnixCaps); as
root, and as an unprivileged user inside a user namespace of its own."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from backend.local.node import confine

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


def _in_pod(state: Path, uid: int | None) -> dict:
    """What a process confined by the plan below sees; run in a forked child (as `uid`)."""
    read_fd, write_fd = os.pipe()
    parent = os.getpid()
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
            try:
                open(f"/proc/{parent}/root{state}/state/pki/token").read()
                seen["through /proc"] = True
            except OSError:
                seen["through /proc"] = False
            try:
                open("/etc/kfcockpit-test/app.yaml", "w")
                seen["read_only"] = False
            except OSError:
                seen["read_only"] = True
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
