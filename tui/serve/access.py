"""Who may open what: a pure policy, no I/O, so it is tested without binding an address.

A bind that only this machine can reach stays open, as a terminal would be. Anything else (a
LAN address, 0.0.0.0, a host name) needs a token: whoever controls the cockpit can start jobs and
kill pods on the presenter's machine. The audience gets a token of its own, so the watch address
shown to a room never grants control.

Whatever the bind, a request must name this server (`Host`) and, when a browser says which page
sent it (`Origin`), come from one of its own pages: a web page elsewhere must not drive or watch an
open loopback cockpit, neither by a cross-site socket nor by DNS rebinding (a name of the
attacker's that now resolves to 127.0.0.1). Jupyter's check_host and tornado's check_origin, as a
pure function.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
import secrets
from dataclasses import dataclass
from typing import Iterable, Literal
from urllib.parse import urlsplit

Role = Literal["control", "audience"]

MIN_TOKEN_LENGTH = 12
_TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_-]+")  # survives a URL unescaped


def is_loopback(host: str) -> bool:
    """True when only this machine can reach `host`. A name other than localhost might resolve
    to anything, and "" or 0.0.0.0 mean every interface: those are not loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_name(netloc: str) -> str | None:
    """The lower-case host of a `Host` header or an origin's netloc ("[::1]:8000" -> "::1")."""
    try:
        return urlsplit(f"//{netloc}").hostname
    except ValueError:
        return None


def names_this_server(host_header: str, bind_host: str, public_host: str | None) -> bool:
    """May a request whose `Host` is `host_header` reach a server bound to `bind_host`? Its own
    names (localhost, the bind address, the public address's host) and loopback addresses; on a
    network bind any address by number too (no name, so no DNS to rebind). Anything else is a
    name the browser resolved to us that is not ours."""
    name = host_name(host_header)
    if not name:
        return False
    if name in {"localhost", bind_host.strip("[]").lower(), public_host}:
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    return address.is_loopback or not is_loopback(bind_host)


def same_origin(origin: str | None, host_header: str, public_netloc: str | None) -> bool:
    """A request with no Origin is no browser's cross-site request (browsers send it on every
    websocket); one with an Origin must come from a page of this server, as tornado's
    check_origin asks: the origin's host and port are the `Host` it was sent to (or the public
    address, behind a proxy that rewrites Host)."""
    if origin is None:
        return True
    try:
        netloc = urlsplit(origin).netloc.lower()
    except ValueError:
        return False
    return bool(netloc) and netloc in {host_header.lower(), public_netloc}


def token_problem(token: str) -> str | None:
    """Why `token` cannot be used (one line), or None."""
    if not _TOKEN_SHAPE.fullmatch(token):
        return "--token may hold only letters, digits, '-' and '_' (it goes in a URL)"
    if len(token) < MIN_TOKEN_LENGTH:
        return f"--token must be at least {MIN_TOKEN_LENGTH} characters; leave it out for a random one"
    return None


def new_token() -> str:
    return secrets.token_urlsafe(16)


def same_secret(given: str, expected: str) -> bool:
    """Constant time, so response timing does not leak how much of a guess was right."""
    return hmac.compare_digest(given.encode(), expected.encode())


@dataclass(frozen=True)
class Access:
    """The tokens in force; None means open (a loopback bind without --token)."""

    control_token: str | None
    audience_token: str | None

    @classmethod
    def for_bind(cls, host: str, token: str | None, audience: bool) -> "Access":
        if token is None and is_loopback(host):
            return cls(None, None)
        return cls(token or new_token(), new_token() if audience else None)

    @property
    def open(self) -> bool:
        return self.control_token is None

    def role_of(self, secret: str) -> Role | None:
        """The role a secret grants (control also grants watching)."""
        if self.control_token and same_secret(secret, self.control_token):
            return "control"
        if self.audience_token and same_secret(secret, self.audience_token):
            return "audience"
        return None

    def allows(self, needed: Role | None, secrets_given: Iterable[str]) -> bool:
        """May a request carrying `secrets_given` (its query token and cookies) reach a place
        that needs `needed` (None: any valid token, e.g. the page's static files)?"""
        if self.open:
            return True
        roles = {self.role_of(s) for s in secrets_given if s}
        if needed == "audience" or needed is None:
            return bool(roles & {"control", "audience"})
        return needed in roles
