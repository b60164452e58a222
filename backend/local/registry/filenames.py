"""An object's name as a file or directory name. Names go up to 253 characters (a DNS subdomain),
more than a file name holds (NAME_MAX, 255 bytes) once a suffix is added: the store's object
files and the kubelet's log directories take a long name's start and a hash of it instead.
Whoever reads such a file finds the object's name inside it, never in its file name."""

from __future__ import annotations

import hashlib

LONGEST = 200  # leaves room for write_atomic's ".NAME.json.tmp-PID"


def file_name(name: str, longest: int = LONGEST) -> str:
    """`name` itself, or when longer than `longest` bytes, its start and a hash of it."""
    if len(name.encode()) <= longest:
        return name
    return f"{name[:100]}~{hashlib.sha256(name.encode()).hexdigest()[:32]}"
