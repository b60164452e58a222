"""Who may open a served cockpit: the policy as data (no address is bound: a non-loopback bind is
decided here, never tried), and serve's one-line refusals of bad options."""

from __future__ import annotations

import pytest

from tui.cli import main
from tui.serve import access
from tui.serve.access import Access, is_loopback, token_problem

TOKEN = "presenter-secret-1"


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"])
def test_loopback_binds_are_recognised(host):
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "", "192.168.1.20", "10.0.0.5", "fe80::1",
                                  "myhost", "myhost.local"])
def test_every_other_bind_counts_as_reachable_from_the_network(host):
    assert not is_loopback(host)


def test_loopback_without_a_token_stays_open():
    policy = Access.for_bind("127.0.0.1", None, audience=True)
    assert policy.open
    assert policy.allows("control", [])


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.20", "myhost"])
def test_a_network_bind_gets_random_tokens_and_refuses_requests_without_them(host):
    policy = Access.for_bind(host, None, audience=True)
    assert not policy.open
    assert len(policy.control_token) >= 20 and len(policy.audience_token) >= 20
    assert policy.control_token != policy.audience_token
    assert Access.for_bind(host, None, audience=False).control_token != policy.control_token
    for role in ("control", "audience", None):
        assert not policy.allows(role, [])
        assert not policy.allows(role, ["", "wrong-token-123456"])


def test_the_audience_token_watches_but_never_controls():
    policy = Access.for_bind("0.0.0.0", TOKEN, audience=True)
    assert policy.control_token == TOKEN
    watcher = [policy.audience_token]
    assert policy.allows("audience", watcher) and policy.allows(None, watcher)
    assert not policy.allows("control", watcher)
    assert policy.allows("control", [TOKEN]) and policy.allows("audience", [TOKEN])


def test_without_audience_mode_there_is_no_audience_token():
    assert Access.for_bind("0.0.0.0", TOKEN, audience=False).audience_token is None


def test_a_token_given_on_loopback_is_required_there_too():
    policy = Access.for_bind("127.0.0.1", TOKEN, audience=False)
    assert not policy.allows("control", []) and policy.allows("control", [TOKEN])


def test_tokens_are_compared_in_constant_time(monkeypatch):
    compared = []

    def compare(a, b):
        compared.append((a, b))
        return a == b

    monkeypatch.setattr(access.hmac, "compare_digest", compare)
    policy = Access.for_bind("0.0.0.0", TOKEN, audience=False)
    assert policy.role_of(TOKEN) == "control" and policy.role_of("é-not-ascii") is None
    assert (TOKEN.encode(), TOKEN.encode()) in compared


@pytest.mark.parametrize("token", ["short", "has space in it!", "ünïcode-token-x", "a/b?c=d&e-fgh"])
def test_unusable_tokens_are_named(token):
    assert token_problem(token)


def test_a_long_url_safe_token_is_fine():
    assert token_problem("Workshop_2026-room-B") is None


@pytest.mark.parametrize("argv, says", [
    (["--port", "0"], "--port 0 is not a port number"),
    (["--port", "70000"], "--port 70000 is not a port number"),
    (["--token", "short"], "at least 12 characters"),
    (["--token", "with space here"], "only letters, digits"),
    (["--audience", "--max-sessions", "3"], "does not go with --audience"),
    (["--max-sessions", "0"], "at least 1"),
])
def test_bad_serve_options_are_one_line_and_exit_2(argv, says, capsys, tmp_path):
    assert main(["serve", "--home", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and err.startswith("kfcockpit: ")


def test_a_network_bind_shows_the_room_a_read_only_cockpit_by_default():
    """issue 17's presenter runs `serve --host 0.0.0.0` and gives the room the audience address."""
    import argparse

    from tui.cli.app_cmds import wants_audience

    def args(host, audience=False, max_sessions=None):
        return argparse.Namespace(host=host, audience=audience, max_sessions=max_sessions)

    assert wants_audience(args("0.0.0.0"))
    assert wants_audience(args("192.0.2.10"))
    assert not wants_audience(args("127.0.0.1"))  # this machine only: a cockpit per tab, as before
    assert not wants_audience(args("0.0.0.0", max_sessions=3))  # a cockpit per tab, asked for
    assert wants_audience(args("127.0.0.1", audience=True))


def test_a_wildcard_bind_prints_an_address_others_can_open_not_localhost():
    """`serve --host 0.0.0.0` printed http://localhost:8000 on a machine whose /etc/hosts maps its
    name to 127.0.0.1: nobody else in the room can open that."""
    import socket

    from tui.cli.app_cmds import public_url

    if all(name == "lo" for _, name in socket.if_nameindex()):
        pytest.skip("this machine has no network interface but loopback")
    url = public_url("0.0.0.0", 8000)
    host = url.removeprefix("http://").rsplit(":", 1)[0].strip("[]")
    assert url.endswith(":8000") and not is_loopback(host), url
    resolved = {info[4][0] for info in socket.getaddrinfo(host, None)}
    assert not all(is_loopback(address) for address in resolved), (url, resolved)
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))  # an address of this machine
