"""The controller's wire format: one JSON object per line over a Unix stream socket.

A unary call is one request line and one reply line. A stream (watch, logs) is one request line
and then reply lines until either side closes. Errors travel as {"error": {"type", "message"}}
and become the same ClusterError subclass on the client.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from backend.cluster import ClusterError, InvalidResource, NotFound, Timeout, Unavailable
from backend.models import ManifestError

# Log batches can be large; the default 64 KiB line limit of asyncio streams is not enough.
LINE_LIMIT = 64 * 1024 * 1024

_ERRORS: dict[str, type[Exception]] = {
    cls.__name__: cls
    for cls in (ClusterError, NotFound, InvalidResource, Unavailable, Timeout, ManifestError)
}


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


async def read(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    """The next message, or None when the peer closed the connection."""
    line = await reader.readline()
    if not line:
        return None
    if not line.endswith(b"\n"):  # the peer died mid-message
        return None
    return json.loads(line)


def error_message(exc: Exception) -> dict[str, Any]:
    kind = type(exc).__name__ if type(exc).__name__ in _ERRORS else "ClusterError"
    return {"error": {"type": kind, "message": str(exc)}}


def raise_if_error(message: dict[str, Any]) -> dict[str, Any]:
    error = message.get("error")
    if error:
        raise _ERRORS.get(error.get("type"), ClusterError)(error.get("message", "controller error"))
    return message
