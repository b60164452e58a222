"""The embedded cluster against plain torchrun, measured in one invocation (medians of rounds).

  1. submit -> first step: `apply` of a two-worker TrainJob on a running cluster, until a worker
     prints its first step, against `torchrun --standalone --nproc-per-node 2` of the same script
     (ratio, goal <= 1.0). The cold path (warm start off: torchrun per pod) is shown beside it.
  2. kill -> first resumed step: SIGKILL of one worker until the recreated group prints a step,
     in seconds (goal <= 1.0) and against torchrun's own restart (--max-restarts 3).
  2b. node failure -> first resumed step: `kfcockpit node fail` of the node of rank 1 (every
     process on it ends at once) until the group recreated on the node left prints a step, beside
     the pod kill, with the node lifecycle's timings used (the grace period and toleration bound it).
  3. throughput: steady-state steps/s of the same job against plain torchrun (goal >= 0.97).
  4. snapshot of a 1 GiB volume against `cp -r` of it (goal >= 10x faster).

Times of lines are taken where each side first reads them from a pipe (each run's shim stamps the
lines it logs; this script stamps torchrun's), on the same clock.

    .venv/bin/python bench/local_cluster.py [--rounds 3] [--steps 600] [--only failures]
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from backend.cluster import Cluster  # noqa: E402
from backend.connect import connect  # noqa: E402
from backend.local.embedded import Embedded  # noqa: E402
from backend.settings import Settings  # noqa: E402
from backend.local.node.podspec import cluster_marker  # noqa: E402
from backend.local.registry.strategies.pods import WARM_ANNOTATION  # noqa: E402
from backend.processes import sweep  # noqa: E402
from backend.models import JobPhase, parse_manifests  # noqa: E402
from training.launch import ddp_command, with_python  # noqa: E402
from training.logfmt import parse_line, step_and_loss  # noqa: E402

MARKER = "KFCOCKPIT_BENCH_RUN"  # torchrun starts its workers in sessions of their own: found by this
ENV = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
MANIFESTS = REPO / "manifests"
SHORT = ["--steps", "400", "--step-delay", "0.05"]  # a paced run: steps come at a known rate
KILL_AT = 12  # the step at which a worker is killed
RESTART_LIMIT = 120.0  # torchrun's own restart can hang on a stale store (torch 2.13): counted as failed


# ---------------------------------------------------------------- plain torchrun


class Torchrun:
    """torchrun of training.ddp with its output read line by line, stamped on arrival."""

    def __init__(self, proc: asyncio.subprocess.Process, marker: str):
        self.proc, self.marker = proc, marker

    @classmethod
    async def start(cls, *args: str, extra: tuple[str, ...] = ()) -> "Torchrun":
        marker = uuid.uuid4().hex
        proc = await asyncio.create_subprocess_exec(
            *with_python(ddp_command("--standalone", "--nproc-per-node=2", *extra, args=args), sys.executable),
            cwd=REPO, env=dict(ENV, **{MARKER: marker}),
            start_new_session=True, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
            limit=1 << 20)
        return cls(proc, marker)

    async def lines(self):
        while line := await self.proc.stdout.readline():
            yield time.time(), line.decode(errors="replace").rstrip("\n")

    async def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        sweep({MARKER: self.marker})
        await self.proc.wait()


async def plain_first_step(args: list[str]) -> float:
    started = time.time()
    run = await Torchrun.start(*args)
    try:
        async for t, line in run.lines():
            if step_and_loss(line):
                return t - started
    finally:
        await run.stop()
    raise RuntimeError("torchrun printed no step")


async def plain_restart(args: list[str], kill_at: int) -> float:
    """torchrun --max-restarts 3: SIGKILL rank 1 at `kill_at`; until the restarted workers' first step."""
    run = await Torchrun.start(*args, extra=("--max-restarts", "3"))
    rank1 = killed = None
    restarted = False
    try:
        async for t, line in run.lines():
            fields = parse_line(line)
            if fields.get("event") == "start":
                if killed is None and fields.get("rank") == "1":
                    rank1 = int(fields["pid"])
                restarted = restarted or (killed is not None and fields.get("restart", "0") != "0")
            elif killed is None and step_and_loss(line) and int(fields["step"]) >= kill_at:
                killed = time.time()
                os.kill(rank1, signal.SIGKILL)
            elif restarted and step_and_loss(line):
                return t - killed
    finally:
        await run.stop()
    raise RuntimeError("torchrun did not come back after the kill (its elastic restart failed)")


async def plain_throughput(steps: int) -> float:
    run = await Torchrun.start("--steps", str(steps))
    try:
        async for _t, line in run.lines():
            fields = parse_line(line)
            if fields.get("event") == "done" and fields.get("rank") == "0":
                return float(fields["steps_per_sec"])
    finally:
        await run.stop()
    raise RuntimeError("torchrun did not finish")


# ---------------------------------------------------------------- the embedded cluster


def job_manifest(name: str, args: list[str], warm: bool = True) -> dict:
    """manifests/trainjob.yaml under another name with other trainer args, as a plain dict (what
    kubectl and the kubernetes client send, and what `job` parses for the socket)."""
    data = yaml.safe_load((MANIFESTS / "trainjob.yaml").read_text())
    data["metadata"]["name"] = name
    if not warm:
        data["metadata"]["annotations"] = {WARM_ANNOTATION: "false"}
    data["spec"]["trainer"]["args"] = args
    return data


def job(name: str, args: list[str], warm: bool = True):
    return parse_manifests(yaml.safe_dump(job_manifest(name, args, warm)))[0]


async def ours_first_step(cluster: Cluster, name: str, args: list[str], warm: bool) -> float:
    started = time.time()
    await cluster.apply(job(name, args, warm))
    try:
        async for batch in cluster.stream_logs(name):
            for line in batch:
                if line.step is not None:
                    return line.time - started
    finally:
        await cluster.delete("TrainJob", name)
    raise RuntimeError(f"{name} printed no step")


async def ours_restart(cluster: Cluster, name: str, args: list[str], kill_at: int) -> float:
    await cluster.apply(job(name, args))
    first_group: set[str] = set()
    killed = None
    try:
        async for batch in cluster.stream_logs(name):
            for line in batch:
                if killed is None:
                    first_group.add(line.pod)
                    if line.step is not None and line.step >= kill_at:
                        pod = next(p for p in await cluster.list_pods(name) if p.rank == 1)
                        killed = time.time()
                        await cluster.kill_pod(pod.name)
                elif line.pod not in first_group and line.step is not None:
                    return line.time - killed
    finally:
        await cluster.delete("TrainJob", name)
    raise RuntimeError(f"{name} did not come back after the kill")


async def ours_node_failure(cluster: Cluster, home: Path, name: str, args: list[str], fail_at: int) -> float:
    """As ours_restart, the node of rank 1 failed instead of the pod killed; the node restored
    (and Ready again, by kubectl's watch) before the next round."""
    embedded = Embedded(home)
    await cluster.apply(job(name, args))
    first_group: set[str] = set()
    failed_at, node = None, None
    try:
        async for batch in cluster.stream_logs(name):
            for line in batch:
                if failed_at is None:
                    first_group.add(line.pod)
                    if line.step is not None and line.step >= fail_at:
                        node = next(p for p in await cluster.list_pods(name) if p.rank == 1).node
                        failed_at = time.time()
                        await embedded.fail_node(node)
                elif line.pod not in first_group and line.step is not None:
                    return line.time - failed_at
    finally:
        await cluster.delete("TrainJob", name)
        if node is not None:
            await embedded.restore_node(node)
            subprocess.run([str(Path(sys.executable).parent / "kubectl"), "wait", f"node/{node}",
                            "--for=condition=Ready", "--timeout=120s"], check=True, capture_output=True,
                           env=dict(os.environ, KUBECONFIG=str(home / "kubeconfig")))
    raise RuntimeError(f"{name} did not come back after its node failed")


async def ours_throughput(cluster: Cluster, name: str, steps: int) -> float:
    """Nobody follows the logs while it runs: the controller is their one reader, as this
    script is torchrun's."""
    await cluster.apply(job(name, ["--steps", str(steps)]))
    try:
        await cluster.wait_job(name, frozenset({JobPhase.COMPLETE}), 600)
        async for batch in cluster.stream_logs(name, follow=False):
            for line in batch:
                fields = parse_line(line.text)
                if fields.get("event") == "done" and fields.get("rank") == "0":
                    return float(fields["steps_per_sec"])
    finally:
        await cluster.delete("TrainJob", name)
    raise RuntimeError(f"{name} did not finish")


def fill_volume(directory: Path, total: int, files: int) -> None:
    """`total` bytes of incompressible data in `files` checkpoint-sized files."""
    block = os.urandom(1 << 20)
    per_file = total // files
    for i in range(files):
        with open(directory / f"ckpt-step-{i:06d}.bin", "wb") as f:
            for j in range(per_file >> 20):
                f.write(block[j % 7:] + block[: j % 7])  # differs per MiB: no dedup or sparse tricks
    os.sync()


async def snapshot_vs_copy(cluster: Cluster, rounds: int) -> tuple[float, float]:
    await cluster.wait_volume("bench-volume", 60)
    volume = cluster.capabilities.volume_path("bench-volume")
    fill_volume(volume, 1 << 30, 64)
    snaps, copies = [], []
    for r in range(rounds):
        started = time.perf_counter()
        await cluster.snapshot("bench-volume", f"bench-snap-{r}")
        snaps.append(time.perf_counter() - started)
        with tempfile.TemporaryDirectory(dir=volume.parents[2]) as d:  # the state root's filesystem
            started = time.perf_counter()
            subprocess.run(["cp", "-r", str(volume), str(Path(d) / "copy")], check=True)
            os.sync()  # a copy is done when it is on disk, as the snapshot's links are
            copies.append(time.perf_counter() - started)
        await cluster.delete("VolumeSnapshot", f"bench-snap-{r}")
    return statistics.median(snaps), statistics.median(copies)


# ---------------------------------------------------------------- the setup every cluster bench shares


@asynccontextmanager
async def embedded_cluster() -> AsyncIterator[tuple[Cluster, Path]]:
    """A running embedded cluster on a fresh state root under /tmp (and that state root), with the
    lesson's runtime and volume applied and a first job run (it warms the zygote and the page
    cache, for every side alike). Stopped at the end; on failure its state root is kept for the
    controller's log."""
    home = Path(tempfile.mkdtemp(prefix="kfc-bench-"))
    embedded = Embedded(home)
    try:
        await embedded.up()
        cluster = await asyncio.to_thread(connect, Settings(home=home))  # the one client path
        for name in ("runtime.yaml", "volume.yaml"):
            for resource in parse_manifests((MANIFESTS / name).read_text()):
                await cluster.apply(resource)
        await ours_first_step(cluster, "warmup", ["--steps", "3"], warm=True)
        yield cluster, home
    except BaseException:
        print(f"bench failed; state kept in {home} (see cluster/controller.log)", file=sys.stderr)
        await _stop(embedded)
        raise
    await cluster.close()
    await _stop(embedded)
    shutil.rmtree(home, ignore_errors=True)


async def _stop(cluster: Embedded) -> None:
    """`cluster down`, and whatever it could not stop killed (a controller still holding its
    lock, by the pid in it; pods by their marker), so that no run leaves a process behind."""
    try:
        await cluster.down()
    finally:
        if cluster.layout.lock.exists():
            with open(cluster.layout.lock) as lock:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free: the controller is gone
                except BlockingIOError:
                    pid = lock.read().strip()
                    if pid.isdigit():
                        os.kill(int(pid), signal.SIGKILL)
        sweep(cluster_marker(cluster.layout.root))


# ---------------------------------------------------------------- main


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=600, help="steps of the throughput runs")
    p.add_argument("--only", choices=("failures",), help="failures: only a pod kill beside a node failure")
    a = p.parse_args()
    async with embedded_cluster() as (cluster, home):
        if a.only == "failures":
            await failures(cluster, home, a.rounds)
            return
        (volume,) = parse_manifests((MANIFESTS / "volume.yaml").read_text())
        data = volume.to_manifest()
        data["metadata"]["name"] = "bench-volume"
        await cluster.apply(parse_manifests(yaml.safe_dump(data))[0])

        short = SHORT
        ckpt = ["--ckpt-every", "5"]
        submit_plain, submit_warm, submit_cold, kill_plain, kill_ours, tput_plain, tput_ours = ([] for _ in range(7))
        plain_failed = 0
        with tempfile.TemporaryDirectory() as scratch:
            for r in range(a.rounds):
                submit_plain.append(await plain_first_step(short))
                submit_warm.append(await ours_first_step(cluster, f"submit-{r}", short, warm=True))
                submit_cold.append(await ours_first_step(cluster, f"submit-cold-{r}", short, warm=False))
                print(f"round {r + 1}: submit -> first step: torchrun {submit_plain[-1]:.3f}s, "
                      f"cluster {submit_warm[-1]:.3f}s (cold path {submit_cold[-1]:.3f}s)", flush=True)
            for r in range(a.rounds):
                try:
                    kill_plain.append(await asyncio.wait_for(
                        plain_restart(short + ckpt + ["--ckpt-dir", f"{scratch}/plain-{r}"], KILL_AT), RESTART_LIMIT))
                    plain_text = f"{kill_plain[-1]:.3f}s"
                except asyncio.TimeoutError:
                    plain_failed += 1
                    plain_text = f"no step within {RESTART_LIMIT:g}s (its restart hung)"
                except RuntimeError:
                    plain_failed += 1
                    plain_text = "torchrun exited instead of restarting (its restart failed)"
                kill_ours.append(await ours_restart(cluster, f"kill-{r}",
                                                    short + ckpt + ["--ckpt-dir", f"/checkpoints/kill-{r}"], KILL_AT))
                print(f"round {r + 1}: kill -> first resumed step: torchrun restart {plain_text}, "
                      f"cluster {kill_ours[-1]:.3f}s", flush=True)
            for r in range(a.rounds):
                tput_plain.append(await plain_throughput(a.steps))
                tput_ours.append(await ours_throughput(cluster, f"tput-{r}", a.steps))
                print(f"round {r + 1}: throughput: torchrun {tput_plain[-1]:.1f} steps/s, "
                      f"cluster {tput_ours[-1]:.1f} steps/s", flush=True)
        snap, copy = await snapshot_vs_copy(cluster, a.rounds)

        med = statistics.median
        print()
        print(f"submit -> first step: cluster {med(submit_warm):.3f}s vs torchrun {med(submit_plain):.3f}s "
              f"= ratio {med(submit_warm) / med(submit_plain):.2f} (goal <= 1.0); "
              f"cold path {med(submit_cold):.3f}s = {med(submit_cold) / med(submit_plain):.2f}")
        failed = f"; {plain_failed} of {a.rounds} torchrun restarts failed" if plain_failed else ""
        versus = (f"vs torchrun --max-restarts {med(kill_plain):.3f}s = ratio {med(kill_ours) / med(kill_plain):.2f}"
                  if kill_plain else "(torchrun never came back)")
        print(f"kill -> first resumed step: cluster {med(kill_ours):.3f}s (goal <= 1.0 s) {versus}{failed}")
        ratios = sorted(o / b for o, b in zip(tput_ours, tput_plain))
        print(f"throughput cluster / torchrun: median {statistics.median(ratios):.3f} "
              f"(rounds {ratios[0]:.3f}..{ratios[-1]:.3f}; goal >= 0.97)")
        print(f"snapshot of a 1 GiB volume: {snap * 1000:.1f} ms vs cp -r {copy:.2f}s = {copy / snap:.0f}x faster "
              "(goal >= 10x)")


async def failures(cluster: Cluster, home: Path, rounds: int) -> None:
    """A pod kill beside a node failure, each until the recreated group's first step."""
    args = SHORT + ["--ckpt-every", "5"]
    kills, nodes = [], []
    for r in range(rounds):
        kills.append(await ours_restart(cluster, f"kill-{r}", args + ["--ckpt-dir", f"/checkpoints/kill-{r}"], KILL_AT))
        nodes.append(await ours_node_failure(cluster, home, f"lost-{r}",
                                             args + ["--ckpt-dir", f"/checkpoints/lost-{r}"], KILL_AT))
        print(f"round {r + 1}: -> first resumed step: pod kill {kills[-1]:.3f}s, node failure {nodes[-1]:.3f}s",
              flush=True)
    timings = (await Embedded(home).status()).get("timings", "")
    med = statistics.median
    print(f"\nnode failure -> first resumed step: {med(nodes):.3f}s beside pod kill {med(kills):.3f}s "
          f"= ratio {med(nodes) / med(kills):.1f} (timings: {timings})")


if __name__ == "__main__":
    asyncio.run(main())
