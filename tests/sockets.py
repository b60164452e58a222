"""The TCP sockets some processes listen on, read from /proc as `ss -ltnp` does: each process's
descriptors name socket inodes, /proc/net/tcp and tcp6 give each inode's local address."""

from __future__ import annotations

import ipaddress
import os
from typing import Iterable

_LISTEN = "0A"


def _inodes(pids: Iterable[int]) -> dict[int, int]:
    """Socket inode -> the pid holding it."""
    found = {}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:  # gone meanwhile
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                found[int(link[8:-1])] = pid
    return found


def _address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    raw = bytes.fromhex(hex_address)  # the kernel prints each 32-bit word in host (little) order
    return ipaddress.ip_address(b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4)))


def listening(pids: Iterable[int]) -> list[tuple[str, int, int]]:
    """(address, port, pid) of every TCP socket of `pids` in the LISTEN state."""
    inodes = _inodes(pids)
    sockets = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                local, state, inode = fields[1], fields[3], int(fields[9])
                if state == _LISTEN and inode in inodes:
                    address, port = local.split(":")
                    sockets.append((str(_address(address)), int(port, 16), inodes[inode]))
    return sockets


def is_loopback(address: str) -> bool:
    """127.0.0.0/8, ::1, or 127.x as an IPv4-mapped IPv6 address (a dual-stack socket's)."""
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


def not_loopback(sockets: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    return [s for s in sockets if not is_loopback(s[0])]
