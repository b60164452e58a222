"""A served cockpit's websocket read as a test does: the terminal text and the server's JSON
messages it has been sent, read until a word shows up, and a ping round trip that says the server
has handled everything sent before it."""

from __future__ import annotations

import asyncio
import json

import aiohttp

WAIT = 60.0  # a guard against a hang on shared cores, not a speed claim


class Screen:
    """What one socket has been sent: terminal text, and the server's JSON messages."""

    def __init__(self, socket: aiohttp.ClientWebSocketResponse) -> None:
        self.socket, self.text, self.messages = socket, "", []

    async def until(self, needle: str) -> str:
        """Read until `needle` shows up; returns everything read so far."""
        async def read() -> None:
            while needle not in self.text:
                message = await self.socket.receive()
                if message.type == aiohttp.WSMsgType.BINARY:
                    self.text += message.data.decode()
                elif message.type == aiohttp.WSMsgType.TEXT:
                    self.messages.append(json.loads(message.data))
                    self.text += f"<{message.data}>"
                else:
                    raise AssertionError(f"closed ({self.socket.close_code}) before {needle!r}:\n{self.text}")
        await asyncio.wait_for(read(), WAIT)
        return self.text

    async def round_trip(self, tag: str) -> None:
        """The server handles a socket's messages in order: once this ping's pong is back,
        everything sent before it has been handled (forwarded or dropped)."""
        await self.socket.send_json(["ping", tag])
        await self.until(json.dumps(["pong", tag]))

    async def closed(self) -> int:
        """The code of the close frame the server sends (frames before it are skipped)."""
        return await asyncio.wait_for(self._next_close(), WAIT)

    async def _next_close(self) -> int:
        while True:
            message = await self.socket.receive()
            if message.type == aiohttp.WSMsgType.CLOSE:
                return message.data
            assert message.type in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT), message


async def open_screen(http, url: str, headers: dict[str, str] | None = None) -> Screen:
    return Screen(await http.ws_connect(url, headers=headers))
