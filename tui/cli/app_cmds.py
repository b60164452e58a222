"""The cockpit itself: `kfcockpit` (no command) and `kfcockpit serve` (browser mode)."""

from __future__ import annotations

import argparse
import re
import socket
import sys
from pathlib import Path

from backend.home import default_home
from tui.cli.common import EXIT_USAGE, add_command, fail, settings_from
from tui.launch import Launch, first_theme, saved_preferences

SERVE_DESCRIPTION = """\
Serve the cockpit to web browsers. Opening the printed address shows the cockpit at once, in a
font big enough for a projector (add ?fontsize=N to the address to change it).

Who can open it:
  On 127.0.0.1 (the default) only this machine can reach it, and nothing more is asked.
  On any other address (--host 0.0.0.0 to show a room) whoever controls the cockpit could start
  jobs and kill pods on this machine, so the address carries a secret token: serve makes a
  random one and prints the full address (--token sets your own). A browser without the token
  gets "403 Forbidden". Give the address only to people who should drive the cockpit.

Showing it to a room (--audience; the default on any address other than 127.0.0.1, unless
--max-sessions asks for a cockpit per tab instead):
  serve also prints an audience address with a token of its own. Everyone who opens it sees the
  same live cockpit, the presenter's, and nothing they press reaches it: no key or click of a
  viewer changes the cluster. However many people watch, there is one cockpit: the presenter's
  browser drives it (the newest tab that opens the cockpit address takes over).

Safe on any address: a request must name this server (its address, localhost, or the host of
--public-url) and come from its own pages; a page of another web site gets "403 Forbidden", even
on 127.0.0.1. For a room, --tls-cert/--tls-key serve https (a self-signed certificate will do:
serve prints its SHA-256 fingerprint for the room to compare with what the browser shows).

How many can drive it (--max-sessions):
  Without --audience, every browser tab on the cockpit address runs a cockpit of its own; at
  most --max-sessions at once (default 2). One more tab gets a page saying it is full.

Example: kfcockpit serve --host 0.0.0.0   (prints the presenter's address and the audience's)"""

DEFAULT_MAX_SESSIONS = 2


def cockpit_options(parser: argparse.ArgumentParser, suppress: bool = False, follow: bool = True) -> None:
    """Options of the cockpit UI, on the root command and on `serve` (and, but for --follow, whose
    job is its argument, on `kubectl cockpit`)."""
    d = (lambda v: argparse.SUPPRESS) if suppress else (lambda v: v)
    g = parser.add_argument_group("cockpit")
    g.add_argument("--no-mouse", action="store_true", default=d(False),
                   help="ignore the mouse (keys only; terminals that pass mouse events badly)")
    g.add_argument("--theme", choices=("dark", "light"), default=d(None),
                   help="colour theme (default: the last one chosen with 't', else dark)")
    if follow:
        g.add_argument("--follow", metavar="JOB", default=d(None),
                       help="follow this TrainJob or RayJob (of --namespace, on --context) from the start "
                            "(default: the newest unfinished job; j chooses another)")


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "serve", help="serve the cockpit to a web browser (workshops)",
                    description=SERVE_DESCRIPTION)
    cockpit_options(p, suppress=True)
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default: 127.0.0.1, this machine only; "
                        "0.0.0.0: every network of this machine, which needs a token)")
    p.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    p.add_argument("--token", default=None,
                   help="the secret browsers must present (default: a random one, printed in the "
                        "address; at least 12 letters, digits, '-' or '_')")
    p.add_argument("--audience", action="store_true",
                   help="one cockpit, driven by the presenter, shown read-only at a second address")
    p.add_argument("--max-sessions", type=int, default=None, metavar="N",
                   help=f"browser tabs that may each drive a cockpit at once (default: "
                        f"{DEFAULT_MAX_SESSIONS}; not with --audience, which has one)")
    p.add_argument("--public-url", default=None,
                   help="the address browsers use, when it differs from http://HOST:PORT")
    p.add_argument("--tls-cert", type=Path, default=None, metavar="PEM",
                   help="serve https with this certificate (PEM; with --tls-key)")
    p.add_argument("--tls-key", type=Path, default=None, metavar="PEM",
                   help="the certificate's private key (PEM)")
    p.add_argument("--replay", metavar="FILE", default=None,
                   help="serve the replay of a recording (kfcockpit replay FILE) instead of a cluster")
    p.set_defaults(handler=serve)


def launch_from_args(args: argparse.Namespace) -> Launch:
    """What the cockpit's first frame needs, from the command line and a plain look at the saved
    preferences; the settings are built later, in a thread (tui/launch.py says why)."""
    home = Path(args.home).expanduser() if args.home else default_home()
    saved = saved_preferences(home)
    override = getattr(args, "theme", None)
    return Launch(home=home, platform="kube" if args.context else args.backend,
                  theme=override or first_theme(saved), make_settings=lambda: settings_from(args),
                  theme_override=override, follow=getattr(args, "follow", None),
                  mouse=not getattr(args, "no_mouse", False) and saved.get("mouse") is not False)


def follow_problem(job: str | None) -> str | None:
    """What makes --follow's JOB a name no cluster can hold (one line), or None. Checked before
    the UI starts; whether the job exists is known only once connected, and the cockpit says so."""
    if job is None or (len(job) <= 253 and re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", job)):
        return None
    return (f"--follow {job!r}: not a job name (lower-case letters, digits, '-' and '.', starting and "
            "ending with a letter or digit)")


def open_cockpit(args: argparse.Namespace) -> int:
    if problem := follow_problem(getattr(args, "follow", None)):
        return fail(problem, EXIT_USAGE, exit_now=False)
    from tui.app import run_cockpit

    return run_cockpit(launch_from_args(args))


def forwarded_options(args: argparse.Namespace) -> list[str]:
    """The options a served cockpit is started with: the same platform, home and looks."""
    argv = ["--backend", args.backend]
    for flag, value in (("--namespace", args.namespace), ("--context", args.context),
                        ("--kubeconfig", args.kubeconfig), ("--home", args.home),
                        ("--theme", getattr(args, "theme", None)), ("--follow", getattr(args, "follow", None))):
        if value:
            argv += [flag, str(value)]
    if getattr(args, "no_mouse", False):
        argv.append("--no-mouse")
    return argv


def public_url(host: str, port: int, scheme: str = "http") -> str:
    """What a browser must open. 0.0.0.0 is not an address a browser can reach: name the machine
    by an address others can reach it at."""
    if host in ("0.0.0.0", "::", ""):
        host = machine_address()
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{scheme}://{host}:{port}"


def machine_address() -> str:
    """This machine's address on the network: the one its route out leaves from (connecting a
    UDP socket sends nothing), else its name when that does not resolve to loopback. Its name
    alone is no answer where /etc/hosts maps it to 127.0.0.1 (getfqdn gives "localhost" there)."""
    from tui.serve.access import is_loopback

    for family, target in ((socket.AF_INET, ("192.0.2.1", 9)), (socket.AF_INET6, ("2001:db8::1", 9))):
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as probe:
                probe.connect(target)
                address = probe.getsockname()[0]
        except OSError:  # no route of this family
            continue
        if not is_loopback(address):
            return address
    name = socket.gethostname()
    try:
        resolved = {info[4][0] for info in socket.getaddrinfo(name, None)}
    except OSError:
        resolved = set()
    fqdn = socket.getfqdn()
    return fqdn if resolved and not all(is_loopback(a) for a in resolved) and not is_loopback(fqdn) else name


def serve_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with serve's options (one line), or None."""
    from tui.serve.access import token_problem

    if problem := follow_problem(getattr(args, "follow", None)):
        return problem
    if not 0 < args.port < 65536:
        return f"--port {args.port} is not a port number (1-65535)"
    if args.token is not None and (problem := token_problem(args.token)):
        return problem
    if args.max_sessions is not None and args.audience:
        return "--max-sessions does not go with --audience: the presenter drives its one cockpit"
    if (args.tls_cert is None) != (args.tls_key is None):
        return "--tls-cert and --tls-key go together: the certificate and its private key"
    if args.max_sessions is not None and args.max_sessions < 1:
        return f"--max-sessions {args.max_sessions}: at least 1 tab must be able to drive it"
    return None


def wants_audience(args: argparse.Namespace) -> bool:
    """A room is shown one read-only cockpit: on a network address that is what serve does unless
    --max-sessions asks for a cockpit per browser tab."""
    from tui.serve.access import is_loopback

    return args.audience or (args.max_sessions is None and not is_loopback(args.host))


def served_replay(args: argparse.Namespace) -> list[str]:
    """`serve --replay FILE`: the arguments of each served cockpit, once the file loads here."""
    from backend.recording.format import load

    path = Path(args.replay).resolve()
    load(path)
    argv = ["replay", str(path)]
    for flag, value in (("--home", args.home), ("--theme", getattr(args, "theme", None))):
        if value:
            argv += [flag, str(value)]
    return argv + (["--no-mouse"] if getattr(args, "no_mouse", False) else [])


def serve(args: argparse.Namespace) -> int:
    if problem := serve_problem(args):
        return fail(problem, EXIT_USAGE, exit_now=False)
    import asyncio

    from tui.serve.access import Access
    from tui.serve.server import ServeConfig, Tls, serve_until_stopped

    args.audience = wants_audience(args)
    tls = None
    if args.tls_cert:
        try:
            tls = Tls.load(args.tls_cert, args.tls_key)
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
            why = getattr(exc, "strerror", None) or getattr(exc, "reason", None) or exc
            return fail(f"--tls-cert {args.tls_cert} / --tls-key {args.tls_key}: no certificate and "
                        f"its key there ({why})", EXIT_USAGE, exit_now=False)
    if args.replay:
        cockpit = served_replay(args)  # a bad recording: one line, exit 2, before serving
    else:
        cockpit = forwarded_options(args)

    config = ServeConfig(
        host=args.host, port=args.port,
        cockpit_argv=[sys.executable, "-m", "tui", *cockpit],
        access=Access.for_bind(args.host, args.token, args.audience), audience=args.audience,
        max_sessions=args.max_sessions or DEFAULT_MAX_SESSIONS,
        public_url=args.public_url or public_url(args.host, args.port, "https" if tls else "http"),
        tls=tls)
    try:
        asyncio.run(serve_until_stopped(config))
    except OSError as exc:  # port taken, address not on this machine
        return fail(f"cannot serve on {args.host}:{args.port}: {exc.strerror or exc}", EXIT_USAGE,
                    exit_now=False)
    return 0
