"""A stand-in cockpit for the serve tests: speaks textual's web driver protocol and echoes every
packet it is sent as terminal text ("key:<text>" or "meta:<type>"), so a test reads exactly what
reached the cockpit process. Appends its pid to the file named by argv[1] when it starts (one line
per cockpit started). Ends on a "quit" meta, or on the key "Q", as a cockpit would."""

from __future__ import annotations

import json
import os
import sys

out, inp = sys.stdout.buffer, sys.stdin.buffer


def send(text: str) -> None:
    data = text.encode()
    out.write(b"D" + len(data).to_bytes(4, "big") + data)
    out.flush()


def read_exactly(size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = inp.read(size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def main() -> None:
    with open(sys.argv[1], "a") as started:
        started.write(f"{os.getpid()}\n")
    out.write(b"__GANGLION__\n")
    send(f"started pid={os.getpid()} size={os.environ['COLUMNS']}x{os.environ['ROWS']}\r\n")
    while True:
        kind = read_exactly(1)
        payload = read_exactly(int.from_bytes(read_exactly(4), "big"))
        if kind == b"D":
            send(f"key:{payload.decode()}\r\n")
            if payload == b"Q":
                return
        else:
            meta = json.loads(payload)
            detail = f" {meta['width']}x{meta['height']}" if meta["type"] == "resize" else ""
            send(f"meta:{meta['type']}{detail}\r\n")
            if meta["type"] == "quit":
                return


if __name__ == "__main__":
    try:
        main()
    except EOFError:
        pass
