"""Textual's web driver protocol, as `textual.drivers.web_driver` speaks it on a child's
stdin/stdout: a `__GANGLION__` line once the app starts, then packets of one type byte, a 4-byte
big-endian length and the payload. b"D" carries terminal bytes (output, or keys going in), b"M" a
JSON object (resize, focus, quit going in; exit, open_url coming out)."""

from __future__ import annotations

import asyncio
import json
from typing import AsyncIterator

READY_LINE = b"__GANGLION__\n"
DATA, META = b"D", b"M"
# A child may print a few lines (a warning) before the driver starts; more means it is not one.
MAX_LINES_BEFORE_READY = 50


def packet(kind: bytes, payload: bytes) -> bytes:
    return kind + len(payload).to_bytes(4, "big") + payload


def meta_packet(**fields: object) -> bytes:
    return packet(META, json.dumps(fields).encode())


async def wait_ready(stdout: asyncio.StreamReader) -> list[bytes]:
    """Read up to the ready line; returns what was printed before it. Raises EOFError when the
    child ended (or was never a Textual app) first."""
    before: list[bytes] = []
    while len(before) < MAX_LINES_BEFORE_READY:
        line = await stdout.readline()
        if not line:
            break
        if line == READY_LINE:
            return before
        before.append(line)
    raise EOFError(b"".join(before).decode(errors="replace"))


async def read_packets(stdout: asyncio.StreamReader) -> AsyncIterator[tuple[bytes, bytes]]:
    """(kind, payload) until the child closes its stdout."""
    while True:
        try:
            kind = await stdout.readexactly(1)
            size = int.from_bytes(await stdout.readexactly(4), "big")
            payload = await stdout.readexactly(size)
        except asyncio.IncompleteReadError:
            return
        yield kind, payload
