"""One cockpit child process: started with textual's web driver, fed keys and resizes as packets
on its stdin, its packets handed to one callback. What the packets are shown on, and who may send
keys, is the session's business."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from typing import Awaitable, Callable, Sequence

from tui.serve.protocol import DATA, meta_packet, packet, read_packets, wait_ready

log = logging.getLogger("kfcockpit.serve")

STOP_SECONDS = 10.0  # a cockpit closes its cluster session on quit; then it is killed
STDERR_KEPT = 16_000  # enough for a traceback when a cockpit fails to start

OnPacket = Callable[[bytes, bytes], Awaitable[None]]


def cockpit_environment(width: int, height: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update(TEXTUAL_DRIVER="tui.serve.driver:ServedDriver", TEXTUAL_COLOR_SYSTEM="truecolor",
               TERM_PROGRAM="textual", COLUMNS=str(width), ROWS=str(height),
               # Frames go to every viewer: 30 a second is smooth and halves the work of 60.
               TEXTUAL_FPS="30")
    return env


class CockpitProcess:
    def __init__(self, argv: Sequence[str], on_packet: OnPacket) -> None:
        self.argv = list(argv)
        self.on_packet = on_packet
        self.ended = asyncio.Event()
        self._child: asyncio.subprocess.Process | None = None
        self._pump: asyncio.Task | None = None
        self._stderr = bytearray()

    async def start(self, width: int, height: int) -> None:
        self._child = await asyncio.create_subprocess_exec(
            *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=cockpit_environment(width, height))
        self._pump = asyncio.create_task(self._run(), name=f"cockpit-{self._child.pid}")

    async def send_keys(self, text: str) -> None:
        await self._write(packet(DATA, text.encode()))

    async def send_meta(self, **fields: object) -> None:
        await self._write(meta_packet(**fields))

    async def _write(self, data: bytes) -> None:
        if self._child is None or self.ended.is_set():
            return
        try:
            self._child.stdin.write(data)
            await self._child.stdin.drain()
        except (ConnectionError, RuntimeError):  # the child is gone: `ended` says so
            pass

    async def stop(self) -> None:
        """Ask the cockpit to quit (it closes its cluster session), kill it if it does not."""
        if self._child is None:
            return
        await self.send_meta(type="quit")
        try:
            await asyncio.wait_for(self.ended.wait(), STOP_SECONDS)
        except asyncio.TimeoutError:
            log.warning("cockpit %s did not quit in %.0fs; killing it", self._child.pid, STOP_SECONDS)
            with contextlib.suppress(ProcessLookupError):
                self._child.kill()
            await self.ended.wait()

    async def _run(self) -> None:
        stderr = asyncio.create_task(self._keep_stderr())
        try:
            await wait_ready(self._child.stdout)
            async for kind, payload in read_packets(self._child.stdout):
                await self.on_packet(kind, payload)
        except EOFError:
            pass  # reported below with its stderr
        except Exception:
            log.exception("cockpit %s: output pump failed", self._child.pid)
        finally:
            code = await self._child.wait()
            await stderr
            if code not in (0, -9, -15):
                text = self._stderr.decode(errors="replace").strip()
                sys.stderr.write(f"kfcockpit serve: a cockpit exited with code {code}\n{text}\n")
            self.ended.set()

    async def _keep_stderr(self) -> None:
        while chunk := await self._child.stderr.read(4096):
            self._stderr += chunk
            del self._stderr[:-STDERR_KEPT]
