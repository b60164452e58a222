"""What the cockpit costs against the number of ranks it follows: 2, 32, 128 and 512 ranks, each
printing 10 step lines a second.

Each run is a child cockpit on a pseudo-terminal of 120x40 with Textual's real Linux driver (what
an SSH session receives), as bench/tui_bytes.py runs it; the parent counts the terminal bytes of a
measured window that starts once the job has settled. The child reports for its window: the CPU
it spent (every thread of the UI process, as a share of one core), key latency (a key posted to
the app every 50 ms until its action runs: p50 and p99), its resident memory, threads and open TCP
connections (at the window's end, and the most seen in it), and the lines the cockpit was handed.

Subjects, each at every size in the same run, the 2-rank figures the baseline:
- synthetic: bench/tui_logs.py's feed (its step lines, 10 ms ticks) handed through the screen's
  own watch workers by a scripted cluster: one pod watch listing every rank's pod, metrics for
  every pod, and the log stream of the ranks the cockpit's log focus wants, as the client reads
  only those;
- cluster: a TrainJob on the embedded cluster whose pods only print step lines (a bash loop that
  sleeps in `read -t`, no fork per line), followed for real: the pod watch, the focused log
  stream, metrics sampling. The cluster is started first, niced: on a real cluster the pods and
  the control plane run elsewhere, here they share two cores with the cockpit. Ranks the node
  cannot hold (its pod limit, kubelet's --max-pods) are reported as not run.

Goals (issue 33) at 512 ranks: key p99 <= 50 ms, <= 50% of a core, <= 40 kB/s at 120x40, threads
and connections bounded (at most the followed logs' cap above the 2-rank figures) and memory
bounded (at most MEMORY_CAP_MB above them: the pods' state is a few kB a pod; what grows with
lines is bounded by the focus).

    nice -n 10 .venv/bin/python bench/tui_scale.py [--ranks 2,32,128,512] [--subjects synthetic,cluster]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.tui_bytes import on_pty  # noqa: E402

SIZE = (120, 40)
LINES_PER_RANK = 10  # step lines a second, per rank
TICK = 0.01  # the synthetic feed's batch interval, as bench/tui_logs.py's
PROBE_EVERY = 0.05
SETTLE_SECONDS = 3.0  # after every pod runs and lines flow: the first screens drawn
GOAL_P99_MS, GOAL_CPU, GOAL_BYTES = 50.0, 0.50, 40_000
MEMORY_CAP_MB = 64
MAX_PODS = 110  # the kubelet's default --max-pods


def job_name(ranks: int) -> str:
    """A name per size: a job deleted and made again under one name would share its pods' label
    with the last one's pods still ending."""
    return f"scale-{ranks}"


# ------------------------------------------------------------------ what the child measures


def process_figures() -> dict:
    """This process's resident memory, threads and open TCP connections, from /proc."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    sockets = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            sockets.add(target[8:-1])
    established = 0
    for table in ("tcp", "tcp6"):
        try:
            rows = Path(f"/proc/self/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        established += sum(1 for row in rows if (cols := row.split())[3] == "01" and cols[9] in sockets)
    return {"rss_mb": int(fields["VmRSS"].split()[0]) / 1024, "threads": int(fields["Threads"]),
            "connections": established}


async def measure_window(app, report_fd: int, seconds: float, lines_read, extra: dict) -> None:
    """The measured window: tells the parent when it starts, probes keys, samples the process,
    then reports and quits."""
    os.write(report_fd, b"start\n")
    wall, cpu, lines = time.perf_counter(), time.process_time(), lines_read()
    most = process_figures()
    end = wall + seconds
    next_sample = wall
    app.latencies.clear()
    while (now := time.perf_counter()) < end:
        if app.sent_at is None:
            app.sent_at = time.perf_counter()
            from textual import events

            app.post_message(events.Key("f12", None))
        if now >= next_sample:
            figures = process_figures()
            most = {key: max(most[key], figures[key]) for key in most}
            next_sample = now + 0.5
        await asyncio.sleep(PROBE_EVERY)
    wall, cpu, lines = time.perf_counter() - wall, time.process_time() - cpu, lines_read() - lines
    lat = sorted(app.latencies)
    report = {"wall": wall, "cpu": cpu, "lines": lines, "probes": len(lat), "worst": [x * 1000 for x in lat[-5:]],
              "p50": statistics.median(lat) * 1000 if lat else None,
              "p99": lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000 if lat else None,
              **process_figures(), **{f"most_{key}": value for key, value in most.items()}, **extra}
    os.write(report_fd, (json.dumps(report) + "\n").encode())


def settled(screen, ranks: int) -> bool:
    """Every rank's pod of the newest attempt runs, and lines reach the logs."""
    table = screen.pods_table
    running = sum(1 for p in table.pods.values() if p.restart_attempt == table.latest_attempt
                  and p.name not in table.gone and p.phase.value == "Running")
    return screen.following.followed == job_name(ranks) and running == ranks and screen.log_view.buffer.added > 0


# ------------------------------------------------------------------ the synthetic subject


class SyntheticCluster:
    """The Cluster calls the cockpit makes while following a job of `ranks` pods, each printing
    LINES_PER_RANK step lines a second; the log stream sends the ranks its focus wants."""

    backend = "bench"

    def __init__(self, ranks: int) -> None:
        from backend.models import JobPhase, JobSummary, PodUsage

        self.ranks = ranks
        self.started = time.time()
        self.name = job_name(ranks)
        self.job = JobSummary(name=self.name, phase=JobPhase.RUNNING, num_nodes=ranks, max_restarts=3,
                              created=self.started)
        self.usage = {self._pod(r): PodUsage(pod=self._pod(r), cpu_cores=0.01, memory_bytes=3 << 20)
                      for r in range(ranks)}

    def _pod(self, rank: int) -> str:
        return f"{self.name}-node-0-{rank}-abcde"

    async def list_jobs(self):
        return [self.job]

    async def get_job(self, name: str):
        return self.job

    async def watch_jobs(self):
        await asyncio.Event().wait()
        yield self.job

    async def watch_pods(self, job: str):
        from backend.models import Pod, PodEvent, PodEventType, PodPhase

        for rank in range(self.ranks):
            yield PodEvent(type=PodEventType.ADDED, pod=Pod(
                name=self._pod(rank), job=self.name, rank=rank, phase=PodPhase.RUNNING, created=self.started,
                started=self.started))
        await asyncio.Event().wait()

    async def stream_logs(self, job: str, follow: bool = True, focus=None):
        from backend.models import LogLine

        sent: dict[int, int] = {}  # rank -> the steps it was read to
        first = set(focus.ranks) if focus is not None else set(range(self.ranks))
        while True:
            await asyncio.sleep(TICK)
            due = int((time.time() - self.started) * LINES_PER_RANK)
            wanted = [r for r in focus.ranks if 0 <= r < self.ranks] if focus is not None else range(self.ranks)
            batch = []
            now = time.time()
            for rank in wanted:
                # a rank read from its first line, or one wanted later from its last lines
                done = sent.get(rank, 0 if rank in first else max(0, due - focus.tail))
                for step in range(done + 1, due + 1):
                    loss = 1.0 / (1 + step * 0.01)
                    batch.append(LogLine(self._pod(rank), rank, now, f"step={step} loss={loss:.6f} rank={rank} "
                                         f"world={self.ranks}", step, loss))
                sent[rank] = due
            if batch:
                yield batch

    async def last_lines(self, job: str, ranks, count: int = 2):
        return []  # no group here hangs

    async def pod_usage(self, job: str, ranks=None):
        if ranks is None:  # metrics.k8s.io lists every pod
            return self.usage
        return {self._pod(r): self.usage[self._pod(r)] for r in ranks if 0 <= r < self.ranks}

    async def volumes(self):
        return []

    async def snapshots(self):
        return []

    async def close(self) -> None:
        pass


async def run_synthetic(app, args) -> None:
    from bench.tui_logs import panels_mounted, screen_reports

    screen = app.screen
    await panels_mounted(screen)
    await screen_reports(screen, lambda: settled(screen, args.ranks), timeout=120)
    await asyncio.sleep(SETTLE_SECONDS)
    buffer = screen.log_view.buffer
    await measure_window(app, args.report_fd, args.seconds, lambda: buffer.added,
                         {"offered": args.ranks * LINES_PER_RANK, "focus": list(screen.following.focus.ranks),
                          "rows": screen.pods_table.row_count})
    app.exit()


# ------------------------------------------------------------------ the embedded cluster's subject

# A pod that prints a step line ten times a second and nothing else: bash, sleeping in `read -t`
# on a pipe it holds both ends of (no process forked per line: 512 pods on two cores).
STEP_LOOP = ('exec {z}<> <(:); i=0; while :; do i=$((i+1)); '
             'echo "step=$i loss=0.500000 rank=$PET_NODE_RANK world=$PET_NNODES"; read -t 0.1 -u $z; done')


def scale_trainjob(ranks: int):
    from backend.models import RuntimeRef, Trainer, TrainJob, TrainJobSpec

    return TrainJob(metadata={"name": job_name(ranks)}, spec=TrainJobSpec(
        runtime_ref=RuntimeRef(name="kfcockpit-torch", kind="TrainingRuntime"),
        trainer=Trainer(num_nodes=ranks, num_proc_per_node=1, command=["bash", "-c", STEP_LOOP])))


async def run_cluster(app, args) -> None:
    from backend.errors import InvalidResource, one_line
    from backend.lesson.jobs import MANIFESTS
    from backend.models import parse_manifests
    from bench.tui_logs import panels_mounted, screen_reports

    screen = app.screen
    await panels_mounted(screen)
    await screen_reports(screen, lambda: screen.session.cluster is not None, timeout=180)
    cluster = screen.session.cluster
    for resource in parse_manifests((MANIFESTS / "runtime.yaml").read_text(), "manifests/runtime.yaml"):
        await cluster.apply(resource)
    try:
        await cluster.apply(scale_trainjob(args.ranks))
    except InvalidResource as exc:  # more pods than the node may hold (its max-pods): said, not run
        os.write(args.report_fd, (json.dumps({"skipped": one_line(exc)}) + "\n").encode())
        app.exit()
        return
    table = screen.pods_table
    try:
        unschedulable = lambda: any(p.reason == "Unschedulable" for p in table.pods.values())  # noqa: E731
        await screen_reports(screen, lambda: settled(screen, args.ranks) or unschedulable(),
                             timeout=120 + args.ranks)
        if unschedulable():
            os.write(args.report_fd, (json.dumps({"skipped": next(
                p.message or p.reason for p in table.pods.values() if p.reason == "Unschedulable")}) + "\n").encode())
            return
        await asyncio.sleep(SETTLE_SECONDS)
        buffer = screen.log_view.buffer
        await measure_window(app, args.report_fd, args.seconds, lambda: buffer.added,
                             {"offered": args.ranks * LINES_PER_RANK, "focus": list(screen.following.focus.ranks),
                              "rows": table.row_count})
    finally:
        await cluster.delete("TrainJob", job_name(args.ranks))
        live = lambda: [p for p in table.pods.values() if p.name not in table.gone]  # noqa: E731
        try:  # the next size starts on a node without this one's pods
            await screen_reports(screen, lambda: not live(), timeout=120)
        finally:
            app.exit()


# ------------------------------------------------------------------ the child


def run_child(args) -> None:
    from backend.settings import Settings
    from bench.tui_logs import ProbedApp
    from tui.config import CockpitConfig
    from tui.launch import Launch

    class Scaled(ProbedApp):
        def on_ready(self) -> None:
            self.run_worker(run_synthetic(self, args) if args.child == "synthetic" else run_cluster(self, args))

    with tempfile.TemporaryDirectory(prefix="kfc-scale-") as own:  # the lesson's state, for the synthetic one
        app = Scaled(Launch.of(Settings(home=Path(args.home or own)), CockpitConfig()))
        if args.child == "synthetic":
            cluster = SyntheticCluster(args.ranks)

            async def open_cluster() -> None:
                app.session.cluster = cluster

            app.session.open_cluster = open_cluster
        app.run()


# ------------------------------------------------------------------ the parent


def measure(subject: str, ranks: int, args, home: str | None) -> dict:
    command = [sys.executable, __file__, "--child", subject, "--ranks-one", str(ranks), "--seconds", str(args.seconds)]
    if home:
        command += ["--home", home]
    total, report = on_pty(command, SIZE, timeout=300 + 2 * ranks + args.seconds, what=f"{subject} {ranks}")
    if "skipped" not in report:
        report["bytes_per_s"] = total / report["wall"]
        report["cpu_share"] = report["cpu"] / report["wall"]
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="2,32,128,512", help="group sizes, comma-separated (2 first: the baseline)")
    parser.add_argument("--subjects", default="synthetic,cluster")
    parser.add_argument("--seconds", type=float, default=10.0, help="the measured window")
    parser.add_argument("--child", choices=("synthetic", "cluster"), help=argparse.SUPPRESS)
    parser.add_argument("--ranks-one", dest="ranks_one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--home", help=argparse.SUPPRESS)
    parser.add_argument("--report-fd", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        args.ranks = args.ranks_one
        run_child(args)
        return 0
    sizes = [int(n) for n in args.ranks.split(",")]
    load = os.getloadavg()[0]
    print(f"the cockpit against the ranks it follows: {LINES_PER_RANK} step lines/s per rank, {SIZE[0]}x{SIZE[1]}, "
          f"{args.seconds:.0f} s window after every pod runs; Textual's Linux driver on a pty")
    print(f"{'subject':>9} {'ranks':>5} {'lines/s':>8} {'read/s':>7} {'CPU %':>6} {'key p50':>8} {'p99 ms':>7} "
          f"{'kB/s':>6} {'RSS MB':>7} {'threads':>7} {'conns':>5}", flush=True)
    verdicts = []
    for subject in args.subjects.split(","):
        home = _cluster_up(max(sizes)) if subject == "cluster" else None
        results = {}
        try:
            for ranks in sizes:
                results[ranks] = measure(subject, ranks, args, home)
                _row(subject, ranks, results[ranks])
        finally:
            if home is not None:
                from backend.local.embedded import Embedded

                asyncio.run(Embedded(Path(home)).down())
                shutil.rmtree(home, ignore_errors=True)
        verdicts += judge(subject, results, sizes)
    for verdict in verdicts:
        print(verdict)
    print(f"  (the machine's load average, 1 min: {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end: "
          "key latency is the cockpit's and whatever else shares its cores)")
    return 1 if any(v.lstrip().startswith("FAIL") for v in verdicts) else 0


def _cluster_up(ranks: int) -> str:
    """An embedded cluster of its own, its node holding `ranks` pods and a few (the kubelet's
    --max-pods), started before the cockpits and at a lower priority: on two shared cores the
    pods' and the control plane's work would otherwise be charged to the cockpit's key latency (on
    any real cluster they run on other machines)."""
    home = tempfile.mkdtemp(prefix="kfc-scale-")
    more = ["--max-pods", str(ranks + 10)] if ranks + 10 > MAX_PODS else []  # the pods a reader adds
    subprocess.run(["nice", "-n", "5", str(Path(sys.executable).parent / "kfcockpit"), "cluster", "up", *more],
                   env=dict(os.environ, KFCOCKPIT_HOME=home), check=True, stdout=subprocess.DEVNULL)
    return home


def _row(subject: str, ranks: int, r: dict) -> None:
    if "skipped" in r:
        print(f"{subject:>9} {ranks:>5}  not run: {r['skipped']}", flush=True)
        return
    print(f"{subject:>9} {ranks:>5} {r['offered']:>8} {r['lines'] / r['wall']:>7.0f} {r['cpu_share'] * 100:>6.1f} "
          f"{r['p50']:>8.1f} {r['p99']:>7.1f} {r['bytes_per_s'] / 1000:>6.1f} {r['rss_mb']:>7.0f} "
          f"{r['most_threads']:>7} {r['most_connections']:>5}", flush=True)


def judge(subject: str, results: dict[int, dict], sizes: list[int]) -> list[str]:
    base = results.get(sizes[0])
    top = results.get(max(sizes))
    lines = []
    if base is None or top is None or "skipped" in top or "skipped" in base:
        return [f"  NOT JUDGED  {subject}: the {max(sizes)}-rank run did not happen"]
    from backend.models import MAX_FOLLOWED

    lines.append(f"  {subject}, {max(sizes)} ranks beside {sizes[0]}: CPU {top['cpu_share']:.0%} vs "
                 f"{base['cpu_share']:.0%}, key p99 {top['p99']:.1f} vs {base['p99']:.1f} ms, "
                 f"{top['bytes_per_s'] / 1000:.1f} vs {base['bytes_per_s'] / 1000:.1f} kB/s, "
                 f"RSS {top['rss_mb']:.0f} vs {base['rss_mb']:.0f} MB, "
                 f"threads {top['most_threads']} vs {base['most_threads']}, connections "
                 f"{top['most_connections']} vs {base['most_connections']} (the most in the window)")
    goals = {
        f"key p99 <= {GOAL_P99_MS:.0f} ms": top["p99"] <= GOAL_P99_MS,
        f"<= {GOAL_CPU:.0%} of a core": top["cpu_share"] <= GOAL_CPU,
        f"<= {GOAL_BYTES // 1000} kB/s at {SIZE[0]}x{SIZE[1]}": top["bytes_per_s"] <= GOAL_BYTES,
        f"threads and connections at most {MAX_FOLLOWED} (the followed logs' cap) above {sizes[0]} ranks":
            top["most_threads"] <= base["most_threads"] + MAX_FOLLOWED
            and top["most_connections"] <= base["most_connections"] + MAX_FOLLOWED,
        f"memory at most {MEMORY_CAP_MB} MB above {sizes[0]} ranks": top["rss_mb"] <= base["rss_mb"] + MEMORY_CAP_MB,
    }
    lines += [f"  {'PASS' if ok else 'FAIL'}  {subject} at {max(sizes)} ranks: {goal}" for goal, ok in goals.items()]
    return lines


if __name__ == "__main__":
    sys.exit(main())
