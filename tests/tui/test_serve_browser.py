"""`kfcockpit serve` in a real browser: Debian's chromium, headless, drives the page over the
DevTools protocol, waits until the served cockpit has sent its checklist and its "connected" job
bar through the page's websocket, and takes a screenshot of what the page's terminal painted.
Skipped, saying why, where chromium is not installed."""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import socket
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install -y chromium)")

# Installed before the page's scripts: keeps the text of what the served app sends over the
# page's websocket (raw terminal output) and resolves waiters when a word shows up in it.
HOOK = """
(() => {
  const Native = window.WebSocket;
  let text = "";
  const waiters = [];
  window.__waitFor = (word) => new Promise(resolve => {
    if (text.includes(word)) resolve(); else waiters.push([word, resolve]);
  });
  window.WebSocket = function (...args) {
    const socket = new Native(...args);
    socket.addEventListener("message", event => {
      if (typeof event.data === "string") return;
      text = (text + new TextDecoder().decode(event.data)).slice(-500000);
      for (let i = waiters.length - 1; i >= 0; i--) {
        if (text.includes(waiters[i][0])) { waiters[i][1](); waiters.splice(i, 1); }
      }
    });
    return socket;
  };
  window.WebSocket.prototype = Native.prototype;
  Object.assign(window.WebSocket, {CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3});
})();
"""

# The cockpit has drawn its checklist and its job bar says it reached the cluster; then two
# frames for the page's terminal to paint what arrived.
PAINTED = """
Promise.all([window.__waitFor("lesson"), window.__waitFor("connected")]).then(() =>
  new Promise(resolve => requestAnimationFrame(() => requestAnimationFrame(() =>
    resolve(document.body.className)))))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening_addresses(port: int) -> set[str]:
    """Local addresses with a socket listening on `port` (from /proc/net/tcp and tcp6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            local, state = row.split()[1], row.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:
                found.add(address)
    return found


def wait_listening(port: int, seconds: float = 30.0) -> None:
    """aiohttp prints nothing once bound (textual-serve silences it) and its banner comes just
    before the bind: the one readiness signal left is a connection that succeeds."""
    import time

    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def read_until(stream, needle: str, limit: int = 200) -> str:
    seen = []
    for _ in range(limit):
        line = stream.readline()
        if not line:
            break
        seen.append(line if isinstance(line, str) else line.decode(errors="replace"))
        if needle in seen[-1]:
            return seen[-1]
    raise AssertionError(f"never saw {needle!r}:\n" + "".join(seen))


def png_pixels(data: bytes) -> tuple[int, int, list[tuple[int, int, int]]]:
    """(width, height, RGB pixels) of an 8-bit non-interlaced RGB/RGBA PNG (what chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    channels = 4 if colour == 6 else 3
    raw, stride = zlib.decompress(idat), width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, corner = previous[i], previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        rows.append(line)
        previous = line
    pixels = [tuple(row[x * channels:x * channels + 3]) for row in rows for x in range(width)]
    return width, height, pixels


async def screenshot_of(url: str, profile: Path) -> tuple[bytes, str]:
    import aiohttp

    browser = await asyncio.create_subprocess_exec(
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--remote-debugging-port=0", f"--user-data-dir={profile}", "--window-size=1280,800",
        "about:blank", stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    try:
        while True:  # "DevTools listening on ws://127.0.0.1:PORT/devtools/browser/ID"
            line = (await asyncio.wait_for(browser.stderr.readline(), 60)).decode()
            assert line, "chromium exited before opening DevTools"
            if "DevTools listening on" in line:
                devtools = line.split()[-1].split("/devtools/")[0].replace("ws://", "http://")
                break
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{devtools}/json/list") as reply:
                page = next(t for t in await reply.json() if t["type"] == "page")
            async with http.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                ids = iter(range(1, 1000))

                async def call(method: str, **params):
                    my_id = next(ids)
                    await ws.send_json({"id": my_id, "method": method, "params": params})
                    async for message in ws:
                        data = json.loads(message.data)
                        if data.get("id") == my_id:
                            assert "error" not in data, data
                            return data["result"]
                        if data.get("method") == "Page.loadEventFired":
                            loaded.set()

                loaded = asyncio.Event()
                await call("Page.enable")
                await call("Page.addScriptToEvaluateOnNewDocument", source=HOOK)
                await call("Page.navigate", url=url)
                while not loaded.is_set():
                    message = json.loads((await asyncio.wait_for(ws.receive(), 60)).data)
                    if message.get("method") == "Page.loadEventFired":
                        loaded.set()
                state = await asyncio.wait_for(
                    call("Runtime.evaluate", expression=PAINTED, awaitPromise=True), 120)
                shot = await call("Page.captureScreenshot", format="png")
                return base64.b64decode(shot["data"]), state["result"]["value"]
    finally:
        browser.kill()
        await browser.wait()


async def test_serve_shows_the_cockpit_in_a_browser_and_listens_on_loopback_only(tmp_path):
    home, port = tmp_path / "home", free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "tui", "serve", "--home", str(home), "--port", str(port), "--no-mouse"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        read_until(server.stdout, "Press Ctrl+C")  # textual-serve's banner: about to listen
        wait_listening(port)
        assert listening_addresses(port) == {"0100007F"}  # 127.0.0.1, nothing else
        png, body_class = await screenshot_of(f"http://127.0.0.1:{port}/", tmp_path / "profile")
    finally:
        import os
        import signal

        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
        from backend.local.cluster import LocalCluster

        await LocalCluster(home).down()
    (tmp_path / "serve.png").write_bytes(png)  # for a person to look at (pytest -s prints where)
    print(f"browser screenshot: {tmp_path / 'serve.png'}")
    assert "-first-byte" in body_class
    width, height, pixels = png_pixels(png)
    assert width == 1280 and height > 400
    colours = set(pixels[::7])
    assert len(colours) > 50, "the page shows no terminal content"
    dark = sum(1 for r, g, b in pixels[::7] if r + g + b < 150)
    assert dark > len(pixels[::7]) // 2, "the dark theme's background does not fill the page"
