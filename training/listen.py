"""Where rank 0 listens for its peers: on the address they dial (MASTER_ADDR), not on every
interface.

torch's TCPStore server binds every interface whatever host it is given (`*:PORT` in `ss -ltn`;
its libuv daemon binds the any-address unless handed a listening socket, `master_listen_fd`), and
so would a plain `create_server(("", 0))`. Peers reach rank 0 only at MASTER_ADDR: on a cluster
its pod's address, on one machine 127.0.0.1. Listening there keeps an unauthenticated store and
the peer watch off every other network the machine is on. When MASTER_ADDR is no address of this
machine (a service address in front of it), every interface is what is left, as torch does.
"""

from __future__ import annotations

import errno
import socket


def listen_where_dialled(master_addr: str, port: int = 0, backlog: int = 128) -> socket.socket:
    """A listening TCP socket on `master_addr`'s address when this machine has it, else on every
    interface (both families where the kernel can); OSError when the port is taken."""
    try:
        addresses = socket.getaddrinfo(master_addr, port, type=socket.SOCK_STREAM)
    except OSError:  # a name that does not resolve here: the peers will say so
        addresses = []
    taken: OSError | None = None
    for family, _, _, _, address in addresses:
        try:
            return socket.create_server(address[:2], family=family, backlog=backlog)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:  # every interface would say the same
                taken = exc
    if taken:
        raise taken
    dual = socket.has_dualstack_ipv6()
    return socket.create_server(("", port), family=socket.AF_INET6 if dual else socket.AF_INET,
                                backlog=backlog, dualstack_ipv6=dual)
