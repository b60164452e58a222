"""3. `kubectl logs -f -l ... --max-log-requests 4` of a TrainJob whose two workers print as fast
as they can: lines/s received against lines/s the controller wrote to its log files, and how long
after its writing the last line arrived."""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
import time
from typing import Any

from kube_api_parts.clients import JOBSET, Api, Follower, stamped_lines


# Each worker opens the go FIFO, prints one line and waits until the bench opens and closes the
# FIFO's other end (so the follower is attached before the flood), then prints its lines as fast as
# it can and exits. Opened without blocking, the FIFO wakes a reader only once a writer has come
# and gone, and every reader at once.
PRINTER = """
import os, select, sys
rank, go, n = os.environ.get("PET_NODE_RANK", "0"), sys.argv[1], int(sys.argv[2])
fifo = os.open(go, os.O_RDONLY | os.O_NONBLOCK)
print(f"ready rank={rank}", flush=True)
select.select([fifo], [], [])
write = sys.stdout.write
for i in range(n):
    write(f"line={i:09d} rank={rank} loss=0.{i:06d} some text a worker would print\\n")
sys.stdout.flush()
"""


async def logs_throughput(api: Api, lines: int) -> dict[str, Any]:
    name = "log-flood"
    go = api.home / "log-flood.go"
    os.mkfifo(go)
    follower = await Follower.start(api, name)
    proc = None
    try:
        await api.create_job({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                              "metadata": {"name": name},
                              "spec": {"runtimeRef": {"name": "torch-distributed"},
                                       "trainer": {"numNodes": 2, "command": ["python", "-c", PRINTER],
                                                   "args": [str(go), str(lines)]}}})
        ready = set()
        async for _arrival, pod, text in follower.lines():  # both workers up, the go FIFO open
            if text.startswith("ready"):
                ready.add(pod)
            if len(ready) == 2:
                break
        await follower.close()
        proc = api.popen("logs", "-f", "-l", f"{JOBSET}={name}", "--max-log-requests", "4", "--tail", "-1")
        reader = Reader(proc)
        reader.start()
        if not await asyncio.to_thread(reader.ready.wait, 60):
            raise RuntimeError("kubectl logs -f showed no worker's first line within 60 s")
        started = time.time()
        os.close(os.open(go, os.O_WRONLY | os.O_NONBLOCK))  # a writer came and went: both workers go
        await asyncio.to_thread(reader.join, 600)
        received = reader.data.split(b"\n")[:-1]
        counts = {rank: sum(1 for line in received if line.startswith(b"line=") and f"rank={rank} ".encode() in line)
                  for rank in ("0", "1")}
        written_last = 0.0
        for pod in follower.pods:
            stamped = stamped_lines(api.home, pod)
            written_last = max(written_last, max(t for t, text in stamped if text.startswith("line=")))
        total = 2 * lines
        return {"lines": total, "received": sum(counts.values()), "complete": counts == {"0": lines, "1": lines},
                "written_rate": total / (written_last - started), "received_rate": total / (reader.last - started),
                "lag": reader.last - written_last}
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        await follower.close()
        go.unlink(missing_ok=True)
        await api.delete_job(name)


class Reader(threading.Thread):
    """kubectl's output read in blocks (a line-by-line reader would be the bottleneck), the time of
    the last block kept; `ready` once both workers' first line arrived."""

    def __init__(self, proc: subprocess.Popen):
        super().__init__(daemon=True)
        self.proc = proc
        self.data = b""
        self.last = 0.0
        self.ready = threading.Event()

    def run(self) -> None:
        chunks = []
        fd = self.proc.stdout.fileno()
        while block := os.read(fd, 1 << 16):
            self.last = time.time()
            chunks.append(block)
            if not self.ready.is_set() and b"".join(chunks).count(b"ready rank=") == 2:
                self.ready.set()
        self.data = b"".join(chunks)
        self.proc.wait()


# ---------------------------------------------------------------- report


def report_logs(logs: dict[str, Any], lines: int) -> None:
    print(f"3. kubectl logs -f -l ... --max-log-requests 4 of 2 workers x {lines} lines; "
          "goal: keeps up with 10k lines/s")
    print(f"  {'written (controller log files)':<38} {logs['written_rate']:9.0f} lines/s")
    keeps_up = logs["complete"] and logs["received_rate"] >= min(10_000, 0.95 * logs["written_rate"])
    print(f"  {'received by kubectl logs -f':<38} {logs['received_rate']:9.0f} lines/s  "
          f"= {logs['received_rate'] / logs['written_rate']:.2f} of written; last line {logs['lag'] * 1000:.0f} ms "
          f"after it was written; {logs['received']}/{logs['lines']} lines" + ("  ok" if keeps_up else "  BEHIND"))
