"""The state root is its owner's alone: found 0755 with Secrets stored 0644 (issue 44), so any
user of the machine could read every namespace's Secrets, the admin token and the signing key."""

from __future__ import annotations

import base64
import os
import stat

from backend.local.layout import Layout
from tests.controlplane import plane


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_the_state_root_is_0700_and_an_older_roots_mode_is_corrected(tmp_path):
    layout = Layout(tmp_path / "home")
    layout.root.mkdir(parents=True, mode=0o755)
    os.chmod(layout.root, 0o755)  # as an older kfcockpit left it
    layout.create()
    assert mode(layout.root) == 0o700


def test_a_secret_is_stored_0600_from_its_first_byte(tmp_path):
    old = os.umask(0)  # whatever the process's umask, the file is 0600
    try:
        client = plane(tmp_path)
        client.create("Secret", {"metadata": {"name": "tok", "namespace": "default"},
                                 "data": {"token": base64.b64encode(b"s3cret").decode()}})
    finally:
        os.umask(old)
    (stored,) = [p for p in tmp_path.rglob("tok.json")]
    assert mode(stored) == 0o600
