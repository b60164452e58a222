"""The cockpit itself: `kfcockpit` (no command) and `kfcockpit serve` (browser mode)."""

from __future__ import annotations

import argparse
import shlex
import socket
import sys

from tui.cli.common import EXIT_USAGE, add_command, fail

SERVE_DESCRIPTION = """\
Serve the cockpit to web browsers (textual-serve): each browser tab gets its own cockpit on the
same cluster. Listens on 127.0.0.1 only unless --host says otherwise; to show it to a room, use
--host 0.0.0.0 and open the printed address. Add ?fontsize=24 to the address for a projector."""


def cockpit_options(parser: argparse.ArgumentParser, suppress: bool = False) -> None:
    """Options of the cockpit UI, on the root command and on `serve`."""
    d = (lambda v: argparse.SUPPRESS) if suppress else (lambda v: v)
    g = parser.add_argument_group("cockpit")
    g.add_argument("--no-mouse", action="store_true", default=d(False),
                   help="ignore the mouse (keys only; terminals that pass mouse events badly)")
    g.add_argument("--theme", choices=("dark", "light"), default=d(None),
                   help="colour theme (default: the last one chosen with 't', else dark)")


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "serve", help="serve the cockpit to a web browser (workshops)",
                    description=SERVE_DESCRIPTION)
    cockpit_options(p, suppress=True)
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default: 127.0.0.1, this machine only)")
    p.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    p.add_argument("--public-url", default=None,
                   help="the address browsers use, when it differs from http://HOST:PORT")
    p.set_defaults(handler=serve)


def open_cockpit(args: argparse.Namespace) -> int:
    from tui.app import run_cockpit

    return run_cockpit(args)


def forwarded_options(args: argparse.Namespace) -> list[str]:
    """The options a served cockpit is started with: the same platform, home and looks."""
    argv = ["--backend", args.backend]
    for flag, value in (("--namespace", args.namespace), ("--context", args.context),
                        ("--kubeconfig", args.kubeconfig), ("--home", args.home),
                        ("--theme", getattr(args, "theme", None))):
        if value:
            argv += [flag, str(value)]
    if getattr(args, "no_mouse", False):
        argv.append("--no-mouse")
    return argv


def public_url(host: str, port: int) -> str:
    """What a browser must open. 0.0.0.0 is not an address a browser can reach: name the machine."""
    if host in ("0.0.0.0", "::", ""):
        host = socket.getfqdn()
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


def serve(args: argparse.Namespace) -> int:
    if not 0 < args.port < 65536:
        return fail(f"--port {args.port} is not a port number (1-65535)", EXIT_USAGE, exit_now=False)
    from textual_serve.server import Server

    command = shlex.join([sys.executable, "-m", "tui", *forwarded_options(args)])
    url = args.public_url or public_url(args.host, args.port)
    server = Server(command, host=args.host, port=args.port, title="kfcockpit", public_url=url)
    try:
        server.serve()
    except OSError as exc:  # port taken, address not on this machine
        return fail(f"cannot serve on {args.host}:{args.port}: {exc.strerror or exc}", EXIT_USAGE,
                    exit_now=False)
    return 0
