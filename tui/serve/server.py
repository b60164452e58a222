"""The aiohttp server of browser mode: the access check in front of every route, the pages, the
sockets, and the cockpits behind them.

Routes: `/` and `/ws` drive a cockpit; with --audience, `/watch` and `/watch/ws` show the
presenter's cockpit read-only; `/static/` is textual-serve's page script and styles.
A token arrives once in the address (`?token=`); the page answers with a cookie and a page that
opens the same address without it, so the secret leaves the address bar and the page's own
requests (its script, its websocket, whose address textual.js builds itself) carry the cookie.
Before any token is looked at, a request must name this server and come from its own pages
(access.py: Host and Origin), so no other web page reaches even an open loopback cockpit.
"""

from __future__ import annotations

import asyncio
import hashlib
import signal
import ssl
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence
from urllib.parse import urlsplit

from aiohttp import web

from tui.serve.access import Access, Role, host_name, names_this_server, same_origin
from tui.serve.pages import (AUDIENCE_FONT_SIZE, CONTROL_FONT_SIZE, FOREIGN, FORBIDDEN, cockpit_page,
                             first_visit_page)
from tui.serve.session import CLOSED_FULL, Session, size_in_cells

# A reloading tab opens its new socket about when the old one closes: wait this long for a
# free slot before saying the cockpit is full.
SLOT_GRACE_SECONDS = 3.0
SHUTDOWN_SECONDS = 15.0
PAGES = {"/": "control", "/watch": "audience"}
SOCKETS = {"/ws": "control", "/watch/ws": "audience"}


@dataclass(frozen=True)
class ServeConfig:
    host: str
    port: int
    cockpit_argv: Sequence[str]
    access: Access
    audience: bool
    max_sessions: int
    public_url: str
    tls: Tls | None = None  # https, and the token's cookie only over it

    @property
    def public_netloc(self) -> str:
        return urlsplit(self.public_url).netloc.lower()

    def admits(self, request: web.Request) -> bool:
        """Does the request name this server and come from no other site's page?"""
        host = request.headers.get("Host", "")
        return (names_this_server(host, self.host, host_name(self.public_netloc))
                and same_origin(request.headers.get("Origin"), host, self.public_netloc))

    def cookie_name(self, role: Role) -> str:
        return f"kfcockpit-{self.port}-{role}"  # cookies ignore ports: two servers, two names

    def address(self, role: Role) -> str:
        path = "/" if role == "control" else "/watch"
        token = self.access.control_token if role == "control" else self.access.audience_token
        return f"{self.public_url.rstrip('/')}{path}" + (f"?token={token}" if token else "")


class Cockpits:
    """Every cockpit this server runs. Without --audience each controlling socket gets a cockpit
    of its own, at most `max_sessions` at once. With it there is one, the stage: the newest
    presenter socket drives it and every audience socket watches it. The stage runs until the
    server stops or the presenter quits it, so a presenter's reload does not restart it."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self.private: set[Session] = set()
        self.stage: Session | None = None
        self._slots = asyncio.Semaphore(config.max_sessions)
        self._ending: set[asyncio.Task] = set()

    async def control(self, socket: web.WebSocketResponse, size: tuple[int, int]) -> None:
        if self.config.audience:
            await self._current_stage().control(socket, size)
            return
        if not await self._take_slot():
            await socket.close(code=CLOSED_FULL, message=self._full_message().encode())
            return
        session = Session(self.config.cockpit_argv, size=size)
        self.private.add(session)
        try:
            await session.control(socket, size)
        finally:
            # aiohttp cancels a handler whose browser hung up: the cockpit is stopped and its
            # slot given back in a task of its own, which that cancellation does not reach.
            ending = asyncio.create_task(self._end(session))
            self._ending.add(ending)
            ending.add_done_callback(self._ending.discard)
            await asyncio.shield(ending)

    async def _end(self, session: Session) -> None:
        try:
            await session.stop()
        finally:
            self.private.discard(session)
            self._slots.release()

    async def watch(self, socket: web.WebSocketResponse) -> None:
        await self._current_stage().watch(socket)

    async def stop_all(self) -> None:
        sessions = [*self.private, *([self.stage] if self.stage else [])]
        await asyncio.gather(*(s.stop() for s in sessions), *self._ending, return_exceptions=True)

    def _current_stage(self) -> Session:
        """The stage, started again if the presenter quit the last one."""
        if self.stage is None or self.stage.ended:
            self.stage = Session(self.config.cockpit_argv)
        return self.stage

    def _full_message(self) -> str:
        """Shown by the refused page; a close reason holds at most 123 bytes."""
        limit = self.config.max_sessions
        tabs = "1 browser tab already drives" if limit == 1 else f"{limit} browser tabs already drive"
        return f"Full: {tabs} a cockpit here (the limit). Close one, then open this again."

    async def _take_slot(self) -> bool:
        try:
            await asyncio.wait_for(self._slots.acquire(), SLOT_GRACE_SECONDS)
            return True
        except asyncio.TimeoutError:
            return False


def role_needed(path: str) -> Role | None:
    """What a path needs: pages and sockets their role; anything else (static files) any token."""
    return PAGES.get(path) or SOCKETS.get(path)


def build_app(config: ServeConfig) -> web.Application:
    cockpits = Cockpits(config)

    @web.middleware
    async def guard(request: web.Request, handler):
        if not config.admits(request):
            return web.Response(status=403, text=FOREIGN, content_type="text/html")
        given = [request.query.get("token", "")]
        given += [request.cookies.get(config.cookie_name(r), "") for r in ("control", "audience")]
        if not config.access.allows(role_needed(request.path), given):
            return web.Response(status=403, text=FORBIDDEN, content_type="text/html")
        if request.path in PAGES and "token" in request.query:
            return remember_token(request, config)
        return await handler(request)

    async def control_page(request: web.Request) -> web.Response:
        font = _font_size(request, CONTROL_FONT_SIZE)
        return web.Response(text=cockpit_page("control", "/ws", font), content_type="text/html")

    async def watch_page(request: web.Request) -> web.Response:
        return web.Response(text=cockpit_page("audience", "/watch/ws", AUDIENCE_FONT_SIZE),
                            content_type="text/html")

    async def control_socket(request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse(heartbeat=15)
        await socket.prepare(request)
        await cockpits.control(socket, size_in_cells(dict(request.query), (120, 36)))
        return socket

    async def watch_socket(request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse(heartbeat=15)
        await socket.prepare(request)
        await cockpits.watch(socket)
        return socket

    async def stop_cockpits(_: web.Application) -> None:
        await cockpits.stop_all()

    app = web.Application(middlewares=[guard])
    app.router.add_get("/", control_page)
    app.router.add_get("/ws", control_socket)
    if config.audience:
        app.router.add_get("/watch", watch_page)
        app.router.add_get("/watch/ws", watch_socket)
    app.router.add_static("/static", _textual_serve_static())
    app.on_shutdown.append(stop_cockpits)
    return app


def remember_token(request: web.Request, config: ServeConfig) -> web.Response:
    """Answer a page address holding a valid token: a cookie, and the address without it."""
    token = request.query["token"]
    query = {k: v for k, v in request.query.items() if k != "token"}
    address = str(request.rel_url.with_query(query))
    if request.headers.get("Sec-Fetch-Site", "none") in ("none", "same-origin"):
        response = web.Response(status=303, headers={"Location": address})  # typed, or our page
    else:  # a link on another site (a chat, a QR reader): pages.first_visit_page says why
        response = web.Response(text=first_visit_page(address), content_type="text/html")
    response.headers.update({"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"})
    role = config.access.role_of(token)
    if role:  # None on an open server: nothing to remember
        # Strict: no other site's page can make the browser send it (a link, a form, a socket).
        response.set_cookie(config.cookie_name(role), token, httponly=True, samesite="Strict", path="/",
                            secure=config.tls is not None)
    return response


def _font_size(request: web.Request, default: int) -> int:
    try:
        return max(8, min(int(request.query.get("fontsize", default)), 72))
    except ValueError:
        return default


def _textual_serve_static() -> Path:
    import textual_serve

    return Path(textual_serve.__file__).parent / "static"


async def serve_until_stopped(config: ServeConfig) -> None:
    """Listen, print the addresses, run until SIGINT or SIGTERM, then stop every cockpit.
    OSError (port taken, address not on this machine) comes out before anything is printed."""
    runner = web.AppRunner(build_app(config), access_log=None, shutdown_timeout=SHUTDOWN_SECONDS)
    await runner.setup()
    try:
        await web.TCPSite(runner, config.host, config.port, ssl_context=config.tls and config.tls.context).start()
    except OSError:
        await runner.cleanup()
        raise
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(signum, stop.set)
    print_addresses(config)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def print_addresses(config: ServeConfig) -> None:
    lines = [f"kfcockpit serve: listening on {config.host}:{config.port}"]
    if config.access.open:
        lines.append(f"  cockpit:  {config.address('control')}   (anyone on this machine may open it)")
    else:
        lines.append(f"  cockpit:  {config.address('control')}   (drives the cluster: keep it to yourself)")
    if config.audience:
        lines.append(f"  audience: {config.address('audience')}   (read-only: the same live screen)")
    if config.tls:
        lines.append(f"  certificate SHA-256: {config.tls.fingerprint}   "
                     "(what a browser shows for the certificate: compare before trusting it)")
    lines.append("Stop with Ctrl+C.")
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()


@dataclass(frozen=True)
class Tls:
    """--tls-cert/--tls-key: the server's TLS context and its certificate's SHA-256, as browsers
    show it (AA:BB:...), printed so a room can compare before trusting a self-signed one."""

    context: ssl.SSLContext
    fingerprint: str

    @classmethod
    def load(cls, cert: Path, key: Path) -> "Tls":
        """OSError or ssl.SSLError (an OSError) when the files are no certificate and its key."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
        pem = cert.read_text()  # the first certificate is the server's; a chain may follow
        first = pem[pem.index(ssl.PEM_HEADER):pem.index(ssl.PEM_FOOTER) + len(ssl.PEM_FOOTER)]
        digest = hashlib.sha256(ssl.PEM_cert_to_DER_cert(first)).hexdigest().upper()
        return cls(context, ":".join(digest[i:i + 2] for i in range(0, len(digest), 2)))
