"""The checkpoint file format, readable without torch.

A checkpoint is one file, `ckpt-step-000015.pt`:

    kfcockpit-checkpoint v1\\n
    {"step": 15, "world_size": 2, "loss": 0.08, "payload_bytes": N, "sha256": "..."}\\n
    <N bytes: torch.save of the full training state>

The JSON header lets the cockpit's checkpoint browser show step, loss and world size, and the
checksum lets anyone tell a valid file from a truncated or corrupt one, all without torch.
Writers create `.ckpt-step-000015.pt.tmp-<pid>` first and rename it into place, so a file with
the final name is complete unless the disk lied; temp files are never picked by `list_valid`.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

MAGIC = b"kfcockpit-checkpoint v1\n"
NAME_RE = re.compile(r"^ckpt-step-(\d{6,})\.pt$")
_MAX_HEADER = 64 * 1024


def file_name(step: int) -> str:
    return f"ckpt-step-{step:06d}.pt"


def temp_name(step: int, pid: int) -> str:
    return f".{file_name(step)}.tmp-{pid}"


class InvalidCheckpoint(Exception):
    """The file is not a complete, intact checkpoint; the message says why in a few words."""


@dataclass(frozen=True)
class CheckpointInfo:
    path: Path
    step: int
    world_size: int
    loss: float | None
    size_bytes: int
    created: float | None
    valid: bool
    problem: str = ""


def encode(header: dict, payload: bytes) -> bytes:
    """Header (with size and checksum added) and payload, as the bytes of one file."""
    full = dict(header, payload_bytes=len(payload), sha256=hashlib.sha256(payload).hexdigest())
    return MAGIC + json.dumps(full, sort_keys=True).encode() + b"\n" + payload


def read_header(path: Path) -> tuple[dict, int]:
    """The JSON header and the offset where the payload starts."""
    with open(path, "rb") as f:
        if f.read(len(MAGIC)) != MAGIC:
            raise InvalidCheckpoint("not a kfcockpit checkpoint (bad magic)")
        line = f.readline(_MAX_HEADER)
        if not line.endswith(b"\n"):
            raise InvalidCheckpoint("truncated header")
        try:
            header = json.loads(line)
        except ValueError as exc:
            raise InvalidCheckpoint(f"unreadable header ({exc.msg})") from None
        return header, f.tell()


def read_payload(path: Path) -> tuple[dict, bytes]:
    """Header and payload after checking size and checksum; raises InvalidCheckpoint."""
    header, offset = read_header(path)
    with open(path, "rb") as f:
        f.seek(offset)
        payload = f.read()
    expected = header.get("payload_bytes")
    if len(payload) != expected:
        raise InvalidCheckpoint(f"truncated: {len(payload)} of {expected} payload bytes")
    if hashlib.sha256(payload).hexdigest() != header.get("sha256"):
        raise InvalidCheckpoint("checksum mismatch")
    return header, payload


def inspect(path: Path, verify: bool = True) -> CheckpointInfo:
    """What a browser shows of one file. `verify` reads the whole file to check the checksum."""
    match = NAME_RE.match(path.name)
    step = int(match.group(1)) if match else -1
    size = path.stat().st_size
    try:
        header = read_payload(path)[0] if verify else read_header(path)[0]
    except (InvalidCheckpoint, OSError) as exc:
        return CheckpointInfo(path, step, 0, None, size, None, False, str(exc))
    return CheckpointInfo(
        path=path,
        step=int(header.get("step", step)),
        world_size=int(header.get("world_size", 0)),
        loss=header.get("loss"),
        size_bytes=size,
        created=header.get("created"),
        valid=True,
    )


def list_files(directory: Path) -> list[Path]:
    """Committed checkpoint files (never temp files), oldest step first."""
    if not directory.is_dir():
        return []
    found = [p for p in directory.iterdir() if NAME_RE.match(p.name) and p.is_file()]
    return sorted(found, key=lambda p: int(NAME_RE.match(p.name).group(1)))
