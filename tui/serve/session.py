"""One cockpit process shown on browser sockets: at most one controlling socket, whose keys and
size reach the cockpit, and any number of watching sockets, which get the same frames and whose
input is dropped here, before the cockpit (audience mode). N viewers cost N socket writes per
frame, not N cockpits doing N watches of the cluster.

Each socket has an outbox drained by its own task, so one stalled browser (a laptop gone to
sleep) cannot hold up the frames of the others; one that falls too far behind is closed.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Sequence

from aiohttp import WSMsgType, web

from tui.serve.process import CockpitProcess
from tui.serve.protocol import DATA, META

log = logging.getLogger("kfcockpit.serve")

OUTBOX_FRAMES = 2000  # ~a minute of busy frames; past that the browser is not keeping up
# Viewers join a running screen: the alternate screen and a hidden cursor, which the cockpit
# sent once at start. Mouse reporting is left off: a viewer's mouse has nothing to drive.
JOIN_PREAMBLE = b"\x1b[?1049h\x1b[?25l"

# Websocket close codes in the private range (4000-4999), read by the page to say why.
CLOSED_ENDED, CLOSED_REPLACED, CLOSED_FULL, CLOSED_SLOW = 4000, 4001, 4002, 4003


class Outbox:
    """Frames for one socket, sent in order by one task."""

    def __init__(self, socket: web.WebSocketResponse) -> None:
        self.socket = socket
        self._queue: asyncio.Queue[bytes | str] = asyncio.Queue(OUTBOX_FRAMES)
        self._task = asyncio.create_task(self._send_all())
        self._closing: asyncio.Task | None = None

    def put(self, message: bytes | str) -> None:
        try:
            self._queue.put_nowait(message)
        except asyncio.QueueFull:
            self.close(CLOSED_SLOW, "this browser fell behind the cockpit; reload the page")

    def close(self, code: int, reason: str) -> None:
        """Close with a reason the page shows. The socket's handler is reading it: the close
        runs beside it, and the handler waits for it in `finish` before the request ends."""
        self._task.cancel()
        if self._closing is None:
            self._closing = asyncio.create_task(self.socket.close(code=code, message=reason.encode()))

    async def finish(self) -> None:
        """Stop sending (the socket is gone or going), after a close under way is done."""
        self._task.cancel()
        if self._closing is not None:
            await self._closing

    async def _send_all(self) -> None:
        try:
            while True:
                message = await self._queue.get()
                if isinstance(message, bytes):
                    await self.socket.send_bytes(message)
                else:
                    await self.socket.send_str(message)
        except (ConnectionError, RuntimeError):  # the browser left; its handler cleans up
            pass


class Session:
    """A cockpit process and the sockets it is shown on. The process starts with the first
    socket; when it ends, every socket is closed saying so."""

    def __init__(self, argv: Sequence[str], size: tuple[int, int] = (120, 36)) -> None:
        self.process = CockpitProcess(argv, self._on_packet)
        self.size = size
        self.controller: Outbox | None = None
        self.viewers: dict[web.WebSocketResponse, Outbox] = {}
        self._started = False

    @property
    def ended(self) -> bool:
        return self.process.ended.is_set()

    async def ensure_started(self) -> None:
        if not self._started:
            self._started = True
            await self.process.start(*self.size)
            asyncio.create_task(self._close_all_when_ended())

    async def control(self, socket: web.WebSocketResponse, size: tuple[int, int]) -> None:
        """Drive the cockpit from `socket` until it closes. A newer controller replaces this one."""
        if self.controller is not None:
            self.controller.close(CLOSED_REPLACED, "the cockpit was opened in another tab")
        outbox = self.controller = Outbox(socket)
        self.size = size
        await self.ensure_started()
        await self._resize(size)
        await self._repaint_for(outbox)
        try:
            await self._obey(socket)
        finally:
            if self.controller is outbox:
                self.controller = None
            await outbox.finish()

    async def watch(self, socket: web.WebSocketResponse) -> None:
        """Show the cockpit on `socket` until it closes; its keys, mouse and size go nowhere."""
        outbox = self.viewers[socket] = Outbox(socket)
        outbox.put(self._stage_size_message())
        await self.ensure_started()
        await self._repaint_for(outbox)
        try:
            async for message in socket:
                if message.type == WSMsgType.TEXT:
                    self._answer_ping(outbox, message.data)
        finally:
            self.viewers.pop(socket, None)
            await outbox.finish()

    async def stop(self) -> None:
        await self.process.stop()

    async def _obey(self, socket: web.WebSocketResponse) -> None:
        """The controller's messages, as textual's page sends them: ["stdin", text],
        ["resize", {width, height}], ["focus"], ["blur"], ["ping", data]."""
        async for message in socket:
            if message.type != WSMsgType.TEXT:
                continue
            kind, body = _envelope(message.data)
            if kind == "stdin" and isinstance(body, str):
                await self.process.send_keys(body)
            elif kind == "resize" and isinstance(body, dict):
                await self._resize(size_in_cells(body, self.size))
            elif kind in ("focus", "blur"):
                await self.process.send_meta(type=kind)
            elif kind == "ping":
                self.controller and self.controller.put(json.dumps(["pong", body]))

    async def _resize(self, size: tuple[int, int]) -> None:
        self.size = size
        await self.process.send_meta(type="resize", width=size[0], height=size[1])
        for outbox in self.viewers.values():
            outbox.put(self._stage_size_message())

    async def _repaint_for(self, outbox: Outbox) -> None:
        """A joining socket has seen none of the screen so far: set its terminal up and have the
        cockpit paint everything (everyone else gets the same frame again, which is harmless)."""
        outbox.put(JOIN_PREAMBLE)
        await self.process.send_meta(type="repaint")

    def _stage_size_message(self) -> str:
        """The page of a viewer fits this many cells into its window (textual's own page script
        ignores message types it does not know)."""
        return json.dumps(["stage_size", {"width": self.size[0], "height": self.size[1]}])

    def _answer_ping(self, outbox: Outbox, text: str) -> None:
        kind, body = _envelope(text)
        if kind == "ping":
            outbox.put(json.dumps(["pong", body]))

    async def _on_packet(self, kind: bytes, payload: bytes) -> None:
        if kind == DATA:
            for outbox in self._all_outboxes():
                outbox.put(payload)
        elif kind == META:
            self._on_meta(json.loads(payload))

    def _on_meta(self, meta: dict) -> None:
        if meta.get("type") == "open_url" and self.controller:  # the presenter's browser only
            self.controller.put(json.dumps(["open_url", {"url": meta.get("url"),
                                                         "new_tab": meta.get("new_tab", True)}]))
        # "exit" is followed by the end of the process: _close_all_when_ended says goodbye.

    def _all_outboxes(self) -> list[Outbox]:
        return ([self.controller] if self.controller else []) + list(self.viewers.values())

    async def _close_all_when_ended(self) -> None:
        await self.process.ended.wait()
        for outbox in self._all_outboxes():
            outbox.close(CLOSED_ENDED, "the cockpit was closed")


def _envelope(text: str) -> tuple[str | None, object]:
    """(kind, body) of a page message; (None, None) for anything that is not one."""
    try:
        message = json.loads(text)
    except ValueError:
        return None, None
    if not isinstance(message, list) or not message or not isinstance(message[0], str):
        return None, None
    return message[0], message[1] if len(message) > 1 else None


def size_in_cells(body: dict, fallback: tuple[int, int]) -> tuple[int, int]:
    """A browser's size in cells, clamped: a bogus one must not make a 10⁶-column screen."""
    try:
        width, height = int(body["width"]), int(body["height"])
    except (KeyError, TypeError, ValueError):
        return fallback
    return max(20, min(width, 500)), max(5, min(height, 200))
