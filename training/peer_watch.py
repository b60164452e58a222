"""A survivor learns that a peer's process is gone when it goes, not at the next collective.

With gloo a dead peer is noticed only when a collective needs it, which at 1 GB can be most of a
step later, and the platform's SIGTERM comes only after its controllers have seen the pod fail
(0.1-0.4 s here). Yet the kernel closes a process's sockets the moment it dies, even on SIGKILL.
So each rank holds one plain TCP connection to rank 0 (a star: rank 0 holds world-1, the others
one), and a thread waits on it: a connection that ends without a goodbye means the process at
the other end is gone, and `lost` is set; the loop then saves the newest complete step at once
(training/exit_save.py).

A rank whose loop ended says goodbye (`finish`) before it leaves, so a finished peer is never taken
for a lost one. A connection counts only once it has greeted: rank 0 greets each one it accepts,
and a rank that exits before it has greeted a peer never reports it (a short run may end before
the watch is up). A peer that stops without dying (SIGSTOP, a frozen node) keeps its sockets
open: the heartbeat and the platform find it (training/heartbeat.py). Anything that fails here
leaves the rank without a watch, never the run without its training.

Rank 0's port travels through the group's rendezvous store, which torch.distributed built.
"""

from __future__ import annotations

import os
import selectors
import socket
import sys
import threading
from datetime import timedelta

from training.listen import listen_where_dialled

STORE_KEY = "kfcockpit/peer-watch"
GREETING = b"w"  # rank 0 to a connection it accepted: the watch is armed
GOODBYE = b"d"  # a rank whose loop ended: its connection's end is no loss
CONNECT_SECONDS = 30.0


class PeerWatch:
    def __init__(self, rank: int):
        self.rank = rank
        self.lost = threading.Event()
        self.lost_rank: int | None = None
        self.armed = threading.Event()  # every connection of this rank greeted: losses are seen
        self._lock = threading.Lock()
        self._armed: dict[socket.socket, int] = {}  # greeted connections -> the rank at the other end
        self._finished = False

    @classmethod
    def start(cls, rank: int, world: int, store, master_addr: str) -> PeerWatch | None:
        """The watch of this rank of a group of `world`, or None (a group of one, or no connection
        could be set up: one line on stderr)."""
        if world < 2:
            return None
        watch = cls(rank)
        try:
            if rank == 0:
                listener = listen_where_dialled(master_addr, backlog=min(world, 4096))
                store.set(STORE_KEY, str(listener.getsockname()[1]))
                target, args = watch._serve, (listener, world - 1)
            else:
                target, args = watch._join, (store, master_addr)
        except (OSError, RuntimeError) as exc:
            sys.stderr.write(f"training: rank {rank}: no peer watch ({exc}); "
                             "a dead peer is found by the next collective\n")
            return None
        threading.Thread(target=target, args=args, name="peer-watch", daemon=True).start()
        return watch

    def finish(self) -> None:
        """This rank's loop ended: say goodbye on every connection, and report no loss from here."""
        with self._lock:
            self._finished = True
            connections = list(self._armed)
        for connection in connections:
            try:
                connection.sendall(GOODBYE)
            except OSError:
                pass

    def _report(self, rank: int) -> None:
        with self._lock:
            if self._finished or self.lost.is_set():
                return
            self.lost_rank = rank
        self.lost.set()

    def _join(self, store, master_addr: str) -> None:
        """A rank other than 0: connect to rank 0, wait for its greeting, then for its end."""
        try:
            store.wait([STORE_KEY], timedelta(seconds=CONNECT_SECONDS))
            port = int(store.get(STORE_KEY))
            connection = socket.create_connection((master_addr, port), timeout=CONNECT_SECONDS)
            connection.sendall(f"{self.rank}\n".encode())
            if connection.recv(1) != GREETING:
                return  # rank 0 left before its watch was up
            connection.settimeout(None)
        except (OSError, RuntimeError, ValueError):
            return
        with self._lock:
            self._armed[connection] = 0
        self.armed.set()
        ended_well = _wait_for_end(connection)
        if not ended_well:
            self._report(0)

    def _serve(self, listener: socket.socket, peers: int) -> None:
        """Rank 0: accept each peer, greet it, and watch every connection for its end."""
        selector = selectors.DefaultSelector()
        selector.register(listener, selectors.EVENT_READ)
        pending: dict[socket.socket, bytes] = {}  # accepted, rank line not read yet
        said_goodbye: set[socket.socket] = set()
        accepted = 0
        while True:
            for key, _ in selector.select():
                sock = key.fileobj
                if sock is listener:
                    connection, _ = listener.accept()
                    pending[connection] = b""
                    selector.register(connection, selectors.EVENT_READ)
                    accepted += 1
                    if accepted == peers:
                        selector.unregister(listener)
                        listener.close()
                    continue
                try:
                    data = sock.recv(64)
                except OSError:
                    data = b""
                if sock in pending:
                    pending[sock] += data
                    if data and b"\n" in pending[sock]:
                        first_line = pending.pop(sock).split(b"\n")[0]
                        if not first_line.isdigit():  # not one of ours: nothing to watch
                            selector.unregister(sock)
                            sock.close()
                            continue
                        peer = int(first_line)
                        with self._lock:
                            self._armed[sock] = peer
                        try:
                            sock.sendall(GREETING)
                        except OSError:
                            pass
                        if len(self._armed) == peers:
                            self.armed.set()
                    elif not data:
                        pending.pop(sock)
                        selector.unregister(sock)
                        sock.close()
                    continue
                if GOODBYE in data:
                    said_goodbye.add(sock)
                if not data:
                    selector.unregister(sock)
                    sock.close()
                    if sock not in said_goodbye:
                        self._report(self._armed[sock])


def _wait_for_end(connection: socket.socket) -> bool:
    """Read until the connection ends; True if the other end said goodbye first."""
    said_goodbye = False
    while True:
        try:
            data = connection.recv(64)
        except OSError:
            return said_goodbye
        if not data:
            return said_goodbye
        said_goodbye = said_goodbye or GOODBYE in data


def master_addr() -> str:
    return os.environ.get("MASTER_ADDR", "127.0.0.1")
