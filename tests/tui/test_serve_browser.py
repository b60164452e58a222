"""`kfcockpit serve` in a real browser: Debian's chromium, headless, driven over the DevTools
protocol, against the real cockpit on the embedded cluster. The page's websocket traffic is
observed by a script installed before the page's own (what the served cockpit sent, the keys the
page sent), so every wait is on an event: a word arriving, a pong, a page load.
Skipped, saying why, where chromium is not installed."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import signal
import socket
import struct
import sys
import zlib
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest

from tests.tui.serve_wire import open_screen

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
TOKEN = "presenter-secret-1"
WAIT = 120.0  # a cockpit starting on 2 shared cores; a guard against a hang, not a speed claim

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install -y chromium)")

# Installed before the page's scripts: keeps the text the served cockpit sends over the page's
# websocket and resolves waiters when a word shows up in it (after a given offset); records the
# keys the page sends; sends a ping and resolves on its pong. A closed socket fails the waiters.
HOOK = """
(() => {
  const Native = window.WebSocket;
  const t = window.__test = {text: "", typed: "", sent: [], waiters: [], socket: null, closed: null};
  let closed;
  t.whenClosed = new Promise(resolve => closed = resolve);
  const settle = () => t.waiters = t.waiters.filter(w => {
    if (t.closed) { w.reject(new Error("socket closed: " + t.closed)); return false; }
    if (w.ready()) { w.resolve(); return false; }
    return true;
  });
  t.when = ready => new Promise((resolve, reject) => { t.waiters.push({ready, resolve, reject}); settle(); });
  t.waitFor = (word, after = 0) => t.when(() => t.text.indexOf(word, after) >= 0);
  t.roundTrip = tag => { t.socket.send(JSON.stringify(["ping", tag])); return t.waitFor(tag); };
  window.WebSocket = function (...args) {
    const socket = t.socket = new Native(...args);
    const send = socket.send.bind(socket);
    socket.send = data => {
      const message = JSON.parse(data);
      t.sent.push(message);
      if (message[0] === "stdin") t.typed += message[1];
      send(data); settle();
    };
    socket.addEventListener("message", event => {
      t.text += typeof event.data === "string" ? event.data : new TextDecoder().decode(event.data);
      settle();
    });
    socket.addEventListener("close", event => {
      t.closed = event.code + " " + event.reason; settle(); closed(t.closed);
    });
    return socket;
  };
  window.WebSocket.prototype = Native.prototype;
  Object.assign(window.WebSocket, {CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3});
})();
"""

# The cockpit drew its checklist and its job bar says it reached the cluster; then two frames
# for the page's terminal to paint what arrived.
PAINTED = """
Promise.all([__test.waitFor("lesson"), __test.waitFor("connected")]).then(() =>
  new Promise(resolve => requestAnimationFrame(() => requestAnimationFrame(() => resolve(true)))))
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



class Page:
    """One chromium tab over its DevTools socket: replies matched to calls, events to waiters."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws, self._ids, self._replies, self._events = ws, iter(range(1, 10**6)), {}, {}
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for message in self.ws:
            data = json.loads(message.data)
            if "id" in data:
                self._replies.pop(data["id"]).set_result(data)
            for waiter in self._events.pop(data.get("method"), []):
                waiter.set_result(data.get("params"))

    async def call(self, method: str, **params) -> dict:
        my_id = next(self._ids)
        reply = self._replies[my_id] = asyncio.get_running_loop().create_future()
        await self.ws.send_json({"id": my_id, "method": method, "params": params})
        data = await asyncio.wait_for(reply, WAIT)
        assert "error" not in data, data
        return data["result"]

    def next_event(self, method: str) -> asyncio.Future:
        waiter = asyncio.get_running_loop().create_future()
        self._events.setdefault(method, []).append(waiter)
        return waiter

    async def open(self, url: str) -> None:
        await self.call("Page.enable")
        await self.call("Page.addScriptToEvaluateOnNewDocument", source=HOOK)
        loaded = self.next_event("Page.loadEventFired")
        await self.call("Page.navigate", url=url)
        await asyncio.wait_for(loaded, WAIT)

    async def evaluate(self, expression: str):
        result = await self.call("Runtime.evaluate", expression=expression, awaitPromise=True,
                                 returnByValue=True, timeout=WAIT * 1000)
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"].get("value")

    async def type(self, text: str) -> None:
        """Key presses as a person makes them, into the terminal's input."""
        await self.evaluate("document.querySelector('.xterm-helper-textarea').focus()")
        for char in text:
            await self.call("Input.dispatchKeyEvent", type="keyDown", key=char, text=char)
            await self.call("Input.dispatchKeyEvent", type="keyUp", key=char)

    async def screenshot(self) -> bytes:
        return base64.b64decode((await self.call("Page.captureScreenshot", format="png"))["data"])

    async def close(self) -> None:
        await self.ws.close()
        await self._reader


@asynccontextmanager
async def chromium(profile: Path):
    """A headless chromium; yields a function that opens a new tab."""
    browser = await asyncio.create_subprocess_exec(
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--remote-debugging-port=0", f"--user-data-dir={profile}", "--window-size=1280,800",
        "about:blank", stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    pages: list[Page] = []
    try:
        while True:  # "DevTools listening on ws://127.0.0.1:PORT/devtools/browser/ID"
            line = (await asyncio.wait_for(browser.stderr.readline(), 60)).decode()
            assert line, "chromium exited before opening DevTools"
            if "DevTools listening on" in line:
                devtools = line.split()[-1].split("/devtools/")[0].replace("ws://", "http://")
                break
        async with aiohttp.ClientSession() as http:
            async def new_page() -> Page:
                async with http.put(f"{devtools}/json/new?about:blank") as reply:
                    target = await reply.json()
                page = Page(await http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0))
                pages.append(page)
                return page

            yield new_page
            for page in pages:
                await page.close()
    finally:
        browser.kill()
        await browser.wait()


@asynccontextmanager
async def serving(home: Path, *options: str):
    """`kfcockpit serve` on 127.0.0.1; yields (port, the lines it printed). Stopped with SIGTERM
    (as Ctrl+C would), then the state root's cluster is taken down."""
    port = free_port()
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tui", "serve", "--home", str(home), "--port", str(port), *options,
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        start_new_session=True)
    try:
        printed = []
        while not printed or not printed[-1].startswith("Stop with Ctrl+C"):  # printed once bound
            line = await asyncio.wait_for(server.stdout.readline(), WAIT)
            assert line, "serve ended early:\n" + "".join(printed)
            printed.append(line.decode())
        yield port, printed
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        await asyncio.wait_for(server.wait(), 60)
        from backend.local.embedded import Embedded

        await Embedded(home).down()
    assert server.returncode == 0, (await server.stdout.read()).decode()
    assert not [p for p in Path("/proc").glob("[0-9]*") if _cockpit_of(p, home)], "a cockpit outlived serve"


def _cockpit_of(proc: Path, home: Path) -> bool:
    try:
        argv = (proc / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"tui" in argv and str(home).encode() in argv and b"serve" not in argv


def address_of(printed: list[str], label: str) -> str:
    line = next(text for text in printed if text.strip().startswith(label))
    return line.split()[1]


def dark_share(png: bytes) -> float:
    width, height, pixels = png_pixels(png)
    sample = pixels[::7]
    return sum(1 for r, g, b in sample if r + g + b < 150) / len(sample)


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



async def test_serve_shows_the_cockpit_at_once_at_a_projector_font_on_loopback_only(tmp_path):
    home = tmp_path / "home"
    async with serving(home, "--no-mouse") as (port, printed):
        assert listening_addresses(port) == {"0100007F"}  # 127.0.0.1, nothing else
        assert address_of(printed, "cockpit:") == f"http://127.0.0.1:{port}/"  # open: no token
        async with chromium(tmp_path / "profile") as new_page:
            page = await new_page()
            await page.open(f"http://127.0.0.1:{port}/")  # and nothing clicked after
            assert await page.evaluate(PAINTED)
            png = await page.screenshot()
            body_class = await page.evaluate("document.body.className")
            fitted = await page.evaluate("__kfcockpit.fitted")
    (tmp_path / "serve.png").write_bytes(png)  # for a person to look at (pytest -s prints where)
    print(f"browser screenshot: {tmp_path / 'serve.png'}")
    assert "-first-byte" in body_class
    # 1280 pixels hold ~133 cells at textual-serve's 16px; the projector font makes them fewer.
    assert 80 <= fitted["width"] <= 115, fitted
    width, height, pixels = png_pixels(png)
    assert width == 1280 and height > 400
    assert len(set(pixels[::7])) > 50, "the page shows no terminal content"
    assert dark_share(png) > 0.5, "the dark theme's background does not fill the page"


async def test_a_token_server_refuses_a_browser_without_it_and_opens_with_it(tmp_path):
    home = tmp_path / "home"
    async with serving(home, "--token", TOKEN) as (port, printed):
        assert address_of(printed, "cockpit:") == f"http://127.0.0.1:{port}/?token={TOKEN}"
        async with chromium(tmp_path / "profile") as new_page:
            page = await new_page()
            await page.open(f"http://127.0.0.1:{port}/")
            assert "needs its full address" in await page.evaluate("document.body.innerText")
            assert await page.evaluate("typeof __kfcockpit") == "undefined"  # no cockpit page
            await page.open(f"http://127.0.0.1:{port}/?token={TOKEN}")
            assert await page.evaluate(PAINTED)
            assert await page.evaluate("location.href") == f"http://127.0.0.1:{port}/"  # token gone


async def test_an_audience_page_shows_the_presenters_cockpit_and_its_keys_change_nothing(tmp_path):
    home = tmp_path / "home"
    async with serving(home, "--token", TOKEN, "--audience") as (port, printed), \
            aiohttp.ClientSession() as http:
        # The presenter drives the cockpit (here over its socket, as the page would).
        presenter = await open_screen(http, f"ws://127.0.0.1:{port}/ws?token={TOKEN}&width=100&height=30")
        await presenter.until("connected")
        async with chromium(tmp_path / "profile") as new_page:
            viewer = await new_page()
            await viewer.open(address_of(printed, "audience:"))
            assert await viewer.evaluate(PAINTED)  # joined late: painted the whole screen
            # The viewer's terminal took the presenter's cells, whatever its window.
            await viewer.evaluate("__test.when(() => JSON.stringify(__kfcockpit.fitted) === "
                                  "JSON.stringify({width: 100, height: 30}))")
            png = await viewer.screenshot()

            # A viewer presses theme, help and quit; the page sends them; the server has handled
            # them once the pong is back.
            await viewer.type("t?q")
            assert await viewer.evaluate("__test.typed") == "t?q"
            await viewer.evaluate("__test.roundTrip('viewer-keys-handled')")
            # Then the presenter opens help. Had any viewer key reached the cockpit, it would have
            # been handled first: the theme saved as light, or the cockpit gone (no help shown).
            shown = await viewer.evaluate("__test.text.length")
            await presenter.socket.send_json(["stdin", "?"])
            await viewer.evaluate(f"__test.waitFor('escape closes', {shown})")
            assert not (home / "cockpit.json").exists() or '"light"' not in (home / "cockpit.json").read_text()

            # The same check sees a key that does reach it: the presenter closes help (the step
            # text under it is painted again) and presses the theme key, then help again.
            shown = await viewer.evaluate("__test.text.length")
            await presenter.socket.send_json(["stdin", "\x1b"])
            await viewer.evaluate(f"__test.waitFor('Done when', {shown})")  # the step card's head
            shown = await viewer.evaluate("__test.text.length")
            await presenter.socket.send_json(["stdin", "t?"])
            await viewer.evaluate(f"__test.waitFor('escape closes', {shown})")
            assert '"light"' in (home / "cockpit.json").read_text()
    (tmp_path / "audience.png").write_bytes(png)
    print(f"audience screenshot: {tmp_path / 'audience.png'}")
    assert len(set(png_pixels(png)[2][::7])) > 50, "the audience page shows no terminal content"
    assert dark_share(png) > 0.5


async def test_a_tab_past_the_session_limit_gets_a_page_saying_so(tmp_path):
    home = tmp_path / "home"
    async with serving(home, "--max-sessions", "1") as (port, _):
        async with chromium(tmp_path / "profile") as new_page:
            first = await new_page()
            await first.open(f"http://127.0.0.1:{port}/")
            assert await first.evaluate(PAINTED)
            second = await new_page()
            await second.open(f"http://127.0.0.1:{port}/")
            assert (await second.evaluate("__test.whenClosed")).startswith("4002 Full")
            notice = await second.evaluate("document.getElementById('notice').innerText")
            shown = await second.evaluate("getComputedStyle(document.getElementById('notice')).display")
            assert await second.evaluate("__test.text") == ""  # not one frame of a cockpit
            assert await first.evaluate("__test.closed") is None  # the first one drives on
    assert notice.startswith("Full: 1 browser tab already drives a cockpit here")
    assert shown == "flex"


async def test_at_1400x900_the_presenter_sees_the_one_screen_dashboard_and_a_key_bar_with_keys(tmp_path):
    """The room's 20px font gave 116 columns at 1400x900, so tabs; the page now takes the largest
    font that holds the dashboard (tui/screens/panels.py GRID_MIN). The key bar was an empty strip
    (textual's Footer drew its keys only while the page had the keyboard's focus)."""
    from tui.screens.panels import GRID_MIN

    home = tmp_path / "home"
    async with serving(home, "--no-mouse") as (port, _):
        async with chromium(tmp_path / "profile") as new_page:
            page = await new_page()
            await page.call("Emulation.setDeviceMetricsOverride", width=1400, height=900, deviceScaleFactor=1,
                            mobile=False)
            await page.open(f"http://127.0.0.1:{port}/")
            await page.evaluate("__test.waitFor('Quit')")  # the key bar's last key, drawn
            assert await page.evaluate(PAINTED)
            fitted = await page.evaluate("__kfcockpit.fitted")
            font = await page.evaluate("document.getElementById('terminal').dataset.fontSize")
            # the bottom row as the cockpit last drew it (escape sequences out)
            bottom = await page.evaluate(
                f"__test.text.split('\\u001b[{fitted['height']};1H').filter(r => r.includes('Quit')).pop()"
                ".split('\\n')[0].replace(/\\u001b\\[[0-9;]*m/g, '')")
            timeline = await page.evaluate("__test.text.includes('failure timeline')")
            png = await page.screenshot()
    (tmp_path / "dashboard.png").write_bytes(png)
    print(f"browser screenshot: {tmp_path / 'dashboard.png'}")
    assert fitted["width"] >= GRID_MIN[0] and fitted["height"] >= GRID_MIN[1], (fitted, font)
    assert int(font) >= 18
    assert timeline  # the grid's panel: every panel at once, not the tabs
    assert "q Quit" in bottom and "? Help" in bottom and "Run" in bottom, bottom  # the key bar, with its keys
