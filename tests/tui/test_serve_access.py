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
    (["--tls-cert", "cert.pem"], "--tls-cert and --tls-key go together"),
    (["--tls-cert", "nowhere.pem", "--tls-key", "nowhere.key"], "no certificate and its key there"),
])
def test_bad_serve_options_are_one_line_and_exit_2(argv, says, capsys, tmp_path):
    assert main(["serve", "--home", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and err.startswith("kfcockpit: ")


@pytest.mark.parametrize("host, bind, public, admitted", [
    ("127.0.0.1:8000", "127.0.0.1", "127.0.0.1", True),
    ("localhost:8000", "127.0.0.1", "127.0.0.1", True),
    ("[::1]:8000", "127.0.0.1", "127.0.0.1", True),
    ("rebind.evil.example:8000", "127.0.0.1", "127.0.0.1", False),  # DNS rebinding
    ("192.0.2.10:8000", "127.0.0.1", "127.0.0.1", False),  # a loopback server has no such address
    ("192.0.2.10:8000", "0.0.0.0", "192.0.2.10", True),
    ("198.51.100.7:8000", "0.0.0.0", "192.0.2.10", True),  # by number: no name to rebind
    ("cockpit.room.example", "0.0.0.0", "cockpit.room.example", True),  # --public-url's name
    ("other.example", "0.0.0.0", "cockpit.room.example", False),
    ("", "127.0.0.1", "127.0.0.1", False),
])
def test_a_request_must_name_this_server(host, bind, public, admitted):
    """Jupyter's check_host (jupyter_server/base/handlers.py): loopback addresses and localhost,
    plus the names it serves at."""
    assert access.names_this_server(host, bind, public) is admitted


@pytest.mark.parametrize("origin, admitted", [
    (None, True),  # no browser's cross-site request
    ("http://127.0.0.1:8000", True),
    ("http://127.0.0.1:8001", False),
    ("https://evil.example", False),
    ("null", False),
    ("http://cockpit.room.example", True),  # the public address, behind a proxy
])
def test_a_browser_request_must_come_from_this_servers_pages(origin, admitted):
    """tornado's WebSocketHandler.check_origin: the Origin's host and port are the Host."""
    assert access.same_origin(origin, "127.0.0.1:8000", "cockpit.room.example") is admitted


def test_serve_prints_its_certificates_fingerprint_as_openssl_computes_it(tmp_path):
    import shutil
    import subprocess

    from tui.serve.server import Tls

    if not shutil.which("openssl"):
        pytest.skip("openssl is not installed: no certificate to make")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=cockpit", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    shown = subprocess.run(["openssl", "x509", "-in", str(cert), "-noout", "-fingerprint", "-sha256"],
                           check=True, capture_output=True, text=True).stdout
    assert Tls.load(cert, key).fingerprint == shown.strip().split("=", 1)[1]
    with pytest.raises(OSError):
        Tls.load(cert, cert)  # a certificate is no key


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
