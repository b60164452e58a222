"""The serve server at the wire, without a browser: what needs a token, what a token opens, that
an audience socket's input never reaches the cockpit, that many viewers share one cockpit, and
that the session limit holds. The cockpit is `serve_fake_cockpit.py`, which echoes every packet
it receives, so each test reads what reached the cockpit process; the real cockpit in a real
browser is test_serve_browser.py."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from tui.serve import server as serve_server
from tui.serve.access import Access
from tui.serve.server import ServeConfig, build_app
from tui.serve.session import CLOSED_ENDED, CLOSED_FULL, CLOSED_REPLACED

from tests.tui.serve_wire import WAIT, open_screen

FAKE = Path(__file__).with_name("serve_fake_cockpit.py")
TOKEN = "presenter-secret-1"


class Cockpits:
    """A server on 127.0.0.1 running fake cockpits; `started` lists the pid of every cockpit."""

    def __init__(self, tmp_path: Path, audience: bool, max_sessions: int = 2, token: str | None = TOKEN):
        self.pids_file = tmp_path / "started"
        self.pids_file.touch()
        self.access = Access.for_bind("127.0.0.1", token, audience)
        config = ServeConfig(host="127.0.0.1", port=0, cockpit_argv=[sys.executable, str(FAKE), str(self.pids_file)],
                             access=self.access, audience=audience, max_sessions=max_sessions,
                             public_url="http://127.0.0.1")
        self.server = TestServer(build_app(config), host="127.0.0.1")

    @property
    def started(self) -> list[str]:
        return self.pids_file.read_text().split()

    def url(self, path: str, token: str | None = None, **query: object) -> str:
        if token:
            query["token"] = token
        q = "&".join(f"{k}={v}" for k, v in query.items())
        return str(self.server.make_url(path)) + (f"?{q}" if q else "")


@pytest.fixture
async def http():
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as session:
        yield session


async def serving(tmp_path: Path, **kwargs) -> Cockpits:
    cockpits = Cockpits(tmp_path, **kwargs)
    await cockpits.server.start_server()
    return cockpits


@pytest.fixture
async def stage(tmp_path):
    cockpits = await serving(tmp_path, audience=True)
    yield cockpits
    await cockpits.server.close()


@pytest.fixture
async def private(tmp_path, monkeypatch):
    monkeypatch.setattr(serve_server, "SLOT_GRACE_SECONDS", 0.3)
    cockpits = await serving(tmp_path, audience=False, max_sessions=2)
    yield cockpits
    await cockpits.server.close()


# --- access --------------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/", "/ws", "/watch", "/watch/ws", "/static/js/textual.js", "/nowhere"])
async def test_without_the_token_everything_is_forbidden(stage, http, path):
    for token in (None, "wrong-token-123456"):
        async with http.get(stage.url(path, token)) as reply:
            assert reply.status == 403, path
            assert "needs its full address" in await reply.text()
    assert stage.started == []


async def test_a_websocket_without_the_token_is_refused_before_any_cockpit_starts(stage, http):
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await http.ws_connect(stage.url("/ws"))
    assert refused.value.status == 403
    assert stage.started == []


async def test_the_token_in_the_address_becomes_a_cookie_and_leaves_the_address(stage, http):
    async with http.get(stage.url("/", TOKEN, fontsize=24), allow_redirects=False) as reply:
        assert reply.status == 303
        assert reply.headers["Location"] == "/?fontsize=24"
        cookie = reply.cookies["kfcockpit-0-control"]  # the configured port
        assert cookie.value == TOKEN and cookie["httponly"] and cookie["samesite"] == "Strict"
    async with http.get(stage.url("/", fontsize=24)) as page:  # the cookie alone now
        assert page.status == 200
        html = await page.text()
        assert 'data-font-size="24"' in html and 'data-role="control"' in html
        assert TOKEN not in html
    async with http.get(stage.url("/static/js/textual.js")) as script:
        assert script.status == 200
    screen = await open_screen(http, stage.url("/ws", width=90, height=30))
    await screen.until("started pid=")


async def test_a_link_on_another_site_gets_the_cookie_and_a_page_that_leaves_the_token_behind(stage, http):
    """A SameSite=Strict cookie set on a redirect that another site's link started is not sent on
    the redirect's target: such a first visit gets a page that opens the address itself."""
    async with http.get(stage.url("/", TOKEN, fontsize=24), allow_redirects=False,
                        headers={"Sec-Fetch-Site": "cross-site"}) as reply:
        assert reply.status == 200 and reply.headers["Referrer-Policy"] == "no-referrer"
        assert reply.cookies["kfcockpit-0-control"]["samesite"] == "Strict"
        page = await reply.text()
    assert '<meta http-equiv="refresh" content="0; url=/?fontsize=24">' in page
    assert TOKEN not in page
    async with http.get(stage.url("/", fontsize=24), allow_redirects=False) as opened:
        assert opened.status == 200 and 'data-role="control"' in await opened.text()


async def test_no_address_holds_the_token_after_the_first_visit(stage, http):
    """Every address the page and its socket use afterwards, and every address the server sends
    the browser to, is free of the token."""
    async with http.get(stage.url("/", TOKEN, fontsize=24)) as page:
        assert page.status == 200
        addresses = [str(step.url) for step in page.history] + [str(page.url)]
        html = await page.text()
    assert TOKEN in addresses[0] and all(TOKEN not in a for a in addresses[1:]), addresses
    assert TOKEN not in html
    screen = await open_screen(http, stage.url("/ws", width=90, height=30))  # the cookie alone
    await screen.until("started pid=")


# --- other sites ---------------------------------------------------------------------------

@pytest.mark.parametrize("token", [TOKEN, None])
async def test_a_socket_from_another_sites_page_is_refused(tmp_path, http, token):
    """tornado's WebSocketHandler.check_origin: the Origin must be the Host the socket was sent
    to. Found open: a page on evil.example streamed the live cockpit of an open loopback serve."""
    cockpits = await serving(tmp_path, audience=False, token=token)
    try:
        for origin in ("https://evil.example", "null", f"http://localhost:{cockpits.server.port + 1}"):
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await http.ws_connect(cockpits.url("/ws", token), headers={"Origin": origin})
            assert refused.value.status == 403, origin
        assert cockpits.started == []
        own = f"http://127.0.0.1:{cockpits.server.port}"
        screen = await open_screen(http, cockpits.url("/ws", token), {"Origin": own})
        await screen.until("started pid=")
    finally:
        await cockpits.server.close()


@pytest.mark.parametrize("path", ["/", "/ws", "/static/js/textual.js"])
async def test_a_foreign_host_name_is_refused_so_dns_rebinding_reaches_nothing(tmp_path, http, path):
    """Jupyter's check_host: a name that is not this server's (the attacker's own, now resolving
    to 127.0.0.1) is refused on an open loopback server; its addresses and localhost are not."""
    cockpits = await serving(tmp_path, audience=False, token=None)
    port = cockpits.server.port
    try:
        for host in (f"rebind.evil.example:{port}", "evil.example", f"localhost.evil.example:{port}"):
            async with http.get(cockpits.url(path), headers={"Host": host}) as reply:
                assert reply.status == 403, host
                assert "opens only at its own address" in await reply.text()
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"):
            async with http.get(cockpits.url("/"), headers={"Host": host}) as reply:
                assert reply.status == 200, host
        assert cockpits.started == []
    finally:
        await cockpits.server.close()


async def test_the_cockpit_page_opens_at_a_projector_font_and_connects_by_itself(stage, http):
    async with http.get(stage.url("/", TOKEN)) as page:
        html = await page.text()
    assert 'data-font-size="20"' in html
    assert 'id="start"' not in html and "onclick=\"refresh()\"" not in html  # no start button


async def test_the_audience_token_opens_the_watch_page_but_not_the_cockpit(stage, http):
    watcher = stage.access.audience_token
    async with http.get(stage.url("/watch", watcher)) as page:
        assert page.status == 200 and 'data-role="audience"' in await page.text()
    for path in ("/", "/ws"):  # with its cookie set by now, and with the token in the address
        async with http.get(stage.url(path)) as reply:
            assert reply.status == 403
        async with http.get(stage.url(path, watcher)) as reply:
            assert reply.status == 403


async def test_an_open_loopback_server_needs_nothing(tmp_path, http):
    cockpits = await serving(tmp_path, audience=False, token=None)
    try:
        async with http.get(cockpits.url("/")) as page:
            assert page.status == 200
        screen = await open_screen(http, cockpits.url("/ws"))
        await screen.until("started pid=")
    finally:
        await cockpits.server.close()


# --- audience ------------------------------------------------------------------------------

async def test_an_audience_socket_sends_nothing_to_the_cockpit(stage, http):
    presenter = await open_screen(http, stage.url("/ws", TOKEN, width=100, height=30))
    await presenter.until("meta:repaint")
    viewer = await open_screen(http, stage.url("/watch/ws", stage.access.audience_token))
    await viewer.until("meta:repaint")
    for message in (["stdin", "v"], ["stdin", "Q"], ["resize", {"width": 40, "height": 10}],
                    ["focus"], ["blur"], ["unknown", 1], "not json"):
        await (viewer.socket.send_str(message) if isinstance(message, str) else viewer.socket.send_json(message))
    await viewer.round_trip("after-viewer-input")
    await presenter.socket.send_json(["stdin", "p"])
    seen = await viewer.until("key:p")  # the presenter's key, shown to the viewer too
    assert "key:v" not in seen and "key:Q" not in seen
    assert "meta:resize 40x10" not in seen and "meta:focus" not in seen and "meta:blur" not in seen
    assert (await presenter.until("key:p")).count("key:") == 1


async def test_every_viewer_sees_the_one_cockpit_at_the_presenters_size(stage, http):
    presenter = await open_screen(http, stage.url("/ws", TOKEN, width=100, height=30))
    await presenter.until("started pid=")
    viewers = [await open_screen(http, stage.url("/watch/ws", stage.access.audience_token)) for _ in range(5)]
    for viewer in viewers:
        await viewer.until("meta:repaint")  # a joiner is painted the whole screen
        assert ["stage_size", {"width": 100, "height": 30}] in viewer.messages
    await presenter.socket.send_json(["resize", {"width": 132, "height": 40}])
    for viewer in viewers:
        await viewer.until("meta:resize 132x40")
        assert viewer.messages[-1] == ["stage_size", {"width": 132, "height": 40}]
    assert len(stage.started) == 1


async def test_a_viewer_before_the_presenter_starts_the_stage_and_the_presenter_joins_it(stage, http):
    viewer = await open_screen(http, stage.url("/watch/ws", stage.access.audience_token))
    await viewer.until("started pid=")
    presenter = await open_screen(http, stage.url("/ws", TOKEN, width=100, height=30))
    await presenter.socket.send_json(["stdin", "x"])
    await viewer.until("key:x")
    assert len(stage.started) == 1


async def test_a_newer_presenter_tab_takes_over_and_the_older_one_is_told(stage, http):
    first = await open_screen(http, stage.url("/ws", TOKEN))
    await first.until("started pid=")
    second = await open_screen(http, stage.url("/ws", TOKEN))
    assert await first.closed() == CLOSED_REPLACED
    await second.socket.send_json(["stdin", "y"])
    await second.until("key:y")
    assert len(stage.started) == 1


async def test_when_the_cockpit_quits_every_browser_is_told_and_the_next_one_starts_it_again(stage, http):
    presenter = await open_screen(http, stage.url("/ws", TOKEN))
    viewer = await open_screen(http, stage.url("/watch/ws", stage.access.audience_token))
    await viewer.until("meta:repaint")
    await presenter.socket.send_json(["stdin", "Q"])  # the fake's quit key
    assert await viewer.closed() == CLOSED_ENDED
    assert await presenter.closed() == CLOSED_ENDED
    again = await open_screen(http, stage.url("/ws", TOKEN))
    await again.until("started pid=")
    assert len(stage.started) == 2


# --- the session limit ---------------------------------------------------------------------

async def test_each_tab_has_its_own_cockpit_up_to_the_limit_then_full(private, http):
    tabs = [await open_screen(http, private.url("/ws", TOKEN)) for _ in range(2)]
    for tab in tabs:
        await tab.until("started pid=")
    assert len(set(private.started)) == 2
    third = await open_screen(http, private.url("/ws", TOKEN))
    assert await third.closed() == CLOSED_FULL
    assert len(private.started) == 2
    await tabs[0].socket.close()
    fourth = await open_screen(http, private.url("/ws", TOKEN))  # the slot is free again
    await fourth.until("started pid=")
    assert len(private.started) == 3


async def test_a_full_server_says_why_in_the_close_reason(private, http):
    tabs = [await open_screen(http, private.url("/ws", TOKEN)) for _ in range(2)]
    for tab in tabs:
        await tab.until("started pid=")
    third = await http.ws_connect(private.url("/ws", TOKEN))
    message = await asyncio.wait_for(third.receive(), WAIT)
    assert message.type == aiohttp.WSMsgType.CLOSE
    assert message.data == CLOSED_FULL
    assert message.extra == ("Full: 2 browser tabs already drive a cockpit here (the limit). "
                             "Close one, then open this again.")
