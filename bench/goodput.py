"""Goodput under one kill schedule, three launchers in five configurations, measured in one invocation.

Each launcher trains the same loop (training/) with two workers while a random worker is SIGKILLed
on a schedule timed from the run's first step (one per minute for five minutes; `--quick`: two,
20 s apart, tiny state only). Every line the workers print is fed to the goodput model
(backend/goodput.py) as it arrives, with each kill's time as the failure; the table shows goodput
and its parts per configuration and preset:

  trainer   the lesson's TrainJob (manifests/trainjob.yaml) on the embedded cluster, through the
            Cluster protocol (apply, stream_logs, kill_pod); the group is torn down (survivors
            save at SIGTERM) and recreated by the failure policy. KFCOCKPIT_BENCH_MEMORY_TIER=1
            adds the node-memory tier (training/memory_tier.py): each worker mounts the node's
            /dev/shm/kfcockpit (a hostPath) and is given --memory-dir there, so a survivor saves
            into its node's memory and the next group loads from it, the volume written after.
            Off by default: measured here (5 kills, 1gb) it cost more than it saved unless the
            volume's writes queue behind writeback (README, "node's memory")
  torchrun-c10d  torchrun at its best for restarts: as its docs recommend ("Fault tolerant" in
            run.py's docstring) `--nnodes 1 --max-restarts N --rdzv-id ID --rdzv-backend c10d
            --rdzv-endpoint 127.0.0.1:PORT`, plus `--rdzv-conf join_timeout=30,close_timeout=5`
            (create_handler's table in elastic/rendezvous/dynamic_rendezvous.py; defaults 600 and
            30 s) and `--monitor-interval 0.1` (run.py; how often the agent polls its workers),
            and TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1, the workaround of pytorch/pytorch#135712
            ("TORCH_DISABLE_SHARE_RDZV_TCP_STORE=0 is not compatible with torchelastic restarts").
            By default the workers' process group shares the agent's rendezvous store, and torch
            2.13 keeps that store across restarts (DynamicRendezvousHandler.next_rendezvous builds
            its bootstrap info on the first round only): a restarted group's gloo then dialled a
            peer address nobody listened on any more, by the look of it the previous group's
            ("Gloo connectFullMesh failed ... Connection refused"), each such failure used up a
            restart, and the agent hung after a few. Measured here with
            four kills (loaded machine): shared store, restarts of 26, 94 and 98 s and two
            relaunches; unshared, four restarts of 2.4-6.2 s and none
  torchrun-standalone  `torchrun --standalone --max-restarts N`, torch's single-node example
            (run.py, "Single-node multi-worker"), the default: the same c10d handler on a free
            port, the store shared, so its restarts fail as above
            For both, when torchrun exits failed or prints no line for STALL_LIMIT, the bench
            relaunches it on a fresh store (new port and id), the usual workaround, and the NOTE
            column counts the relaunches of each run (the embedded cluster gives each attempt a
            port of its own for the same reason: backend/local/node/network.py)
  ray       the lesson's RayJob (manifests/rayjob.yaml) on the embedded cluster, a Ray cluster per
            job: training.ray_train with Ray Train's recommended fault tolerance ("Handling
            Failures and Node Preemption", docs.ray.io/en/latest/train/user-guides/fault-tolerance.html):
            FailureConfig(max_failures) and RunConfig(storage_path) on the shared checkpoint volume;
            a killed Ray worker's group is restarted by Ray from the latest checkpoint
  ray-warm  the same entrypoint submitted to a Ray cluster that is already up, as KubeRay's RayJob
            with spec.clusterSelector (ray.io/cluster: NAME) submits to an existing RayCluster
            instead of creating one per job. The embedded cluster refuses clusterSelector (no
            long-lived RayCluster: backend/local/registry/strategies/rayjobs.py), so the warm
            cluster is `ray start --head` on this machine, started before any run is timed, and the
            driver runs as Ray's job supervisor runs a submitted entrypoint: with RAY_ADDRESS set;
            like the torchrun rows, its ranks are killed by the pids their start lines print.
            Same FailureConfig and storage_path (a directory of this machine: one node)

Each configuration runs --runs times (default 1; --quick 3), run r of every configuration before
run r + 1 of any, so what loads the machine falls on all of them alike; the table prints each
figure's median and range, and the verdict compares medians (bench/goodput_runs.py).

Presets: tiny (the lesson's model, paced with --step-delay 0.05 so a step lasts what a small
real model's would; the pause counts as step time for every launcher alike) and 1gb (~1 GB of
parameters + Adam state, no pacing). A throwaway state root is used and its cluster stopped; the
trainer rows start timing once its warm workers are ready, as a cluster whose runtime is
installed has them (ray-warm's Ray is likewise up first; the torchrun rows start Python cold,
as torchrun does).

    .venv/bin/python bench/goodput.py --quick          # three runs of five configurations: 20 min or more
    .venv/bin/python bench/goodput.py                  # tiny and 1gb, five kills each: long
    .venv/bin/python bench/goodput.py --presets 1gb --launchers trainer,torchrun-c10d --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, TextIO

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from backend.errors import NotFound  # noqa: E402
from backend.goodput import LABELS, PARTS, STAGE_LABELS, Goodput, GoodputReport  # noqa: E402
from backend.cluster import Cluster  # noqa: E402
from backend.connect import connect  # noqa: E402
from backend.local.embedded import Embedded  # noqa: E402
from backend.settings import Settings  # noqa: E402
from backend.processes import sweep  # noqa: E402
from backend.models import JobPhase, PodPhase, parse_manifests  # noqa: E402
from backend.raytrain.entrypoint import ray_train_argv  # noqa: E402
from training.launch import ddp_command, with_python  # noqa: E402
from training.logfmt import parse_line, step_and_loss  # noqa: E402
from training.options import option_args  # noqa: E402
from backend.local.node.network import ADDRESS as LOOPBACK, free_port  # noqa: E402
from bench.goodput_runs import summary_cells, verdict  # noqa: E402
from training.ray_train import GROUP_HELPER_ACTORS, RAY_ENV  # noqa: E402

MANIFESTS = REPO / "manifests"
WORKERS = 2
RUNTIME = "kfcockpit-goodput"  # the lesson's runtime with restarts enough for the schedule
MARKER = "KFCOCKPIT_BENCH_RUN"
STALL_LIMIT = 90.0  # torchrun: no step this long after a kill = its restart hung; relaunch
LAUNCHERS = ("trainer", "torchrun-standalone", "torchrun-c10d", "ray", "ray-warm")
PRESETS = ("tiny", "1gb")
# torchrun-c10d: a rendezvous that cannot complete fails in 30 s (not the 600 s default) and so
# exits to the relaunch before STALL_LIMIT; a closed one is seen in 5 s (default 30).
C10D_RDZV_CONF = "join_timeout=30,close_timeout=5"
C10D_ENV = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}  # the workers' own store: see torchrun-c10d above
C10D_MONITOR_INTERVAL = "0.1"  # a dead worker is seen within it (torch 2.13's default, given explicitly)
# trainer: survivors save into the node's memory (KFCOCKPIT_BENCH_MEMORY_TIER=1), else to the volume
MEMORY_TIER = os.environ.get("KFCOCKPIT_BENCH_MEMORY_TIER", "0") == "1"


@dataclass(frozen=True)
class Preset:
    name: str
    options: dict  # the loop's options, both launchers (training.ddp / training.ray_train)
    memory: str  # per worker pod


@dataclass(frozen=True)
class Schedule:
    kills: int
    every: float  # seconds between kills, the first `every` after the first step
    seed: int = 4  # ranks 0, 1, 0, 1, 1: both are hit (seed 15 chose rank 0 all five times)

    def ranks(self) -> list[int]:
        """The rank killed each time: random, and the same for every launcher."""
        chosen = random.Random(self.seed)
        return [chosen.randrange(WORKERS) for _ in range(self.kills)]


def presets(schedule: Schedule, names: list[str]) -> list[Preset]:
    span = (schedule.kills + 1) * schedule.every  # the run outlasts the last kill
    made = {
        # ~60 ms a step here (0.05 s pause + compute)
        "tiny": Preset("tiny", {"model_size": "tiny", "steps": int(span / 0.06), "ckpt_every": 20,
                                "step_delay": 0.05, "samples": 640}, "1Gi"),
        # 1.7-2.5 s a step on this machine's two shared cores: steps for 1.5 s each, so a quiet
        # machine's run still outlasts the last kill (at 2.5 s, 144 steps ended before the fifth).
        # 8Gi: a pod's memory limit counts the page cache of the files it writes (the kubelet's
        # memory cgroup, as upstream's), and a worker holds ~2.7 GB of training state besides the
        # 3 checkpoints kept (3 GB) and the one being written. With 4Gi the cgroup dropped every
        # checkpoint but the newest: the file a survivor's save writes over was never cached
        # (1.1-1.7 s instead of 0.5 s) and each fresh page was reclaimed from the pod's own cache.
        "1gb": Preset("1gb", {"model_size": "1gb", "steps": max(20, int(span / 1.5)), "ckpt_every": 10,
                              "samples": 640}, "8Gi"),
    }
    return [made[name] for name in names]


class Run:
    """One launcher's run: lines into the goodput model, kills on the schedule."""

    def __init__(self, schedule: Schedule, record: TextIO | None = None):
        self.schedule = schedule
        self.record = record  # --lines: every line and kill as JSON, to read a restart's parts
        self.model = Goodput(started=time.time())
        self.stepped = asyncio.Event()  # a step line since the last kill
        self.first_step: float | None = None
        self.kills = 0

    def see(self, at: float, text: str) -> None:
        self.model.feed(at, text)
        if self.record is not None:
            self.record.write(json.dumps({"time": at, "text": text}) + "\n")
        if step_and_loss(text) is not None:
            self.first_step = self.first_step or at
            self.stepped.set()

    async def kills_on_schedule(self, kill) -> None:
        """`kill(rank)` at each scheduled time, once the group is training (a step was seen)."""
        await self.stepped.wait()
        for index, rank in enumerate(self.schedule.ranks()):
            await asyncio.sleep(max(0.0, self.first_step + (index + 1) * self.schedule.every - time.time()))
            while True:
                await self.stepped.wait()  # never kill a group that is still recovering
                if await kill(rank):
                    break
                self.stepped.clear()
            self.model.failure(time.time())
            if self.record is not None:
                self.record.write(json.dumps({"time": time.time(), "kill": rank}) + "\n")
            self.kills += 1
            self.stepped.clear()


# ---------------------------------------------------------------- the embedded cluster's jobs


def _manifest(name: str) -> dict:
    return yaml.safe_load((MANIFESTS / name).read_text())


def goodput_runtime():
    data = _manifest("runtime.yaml")
    data["metadata"]["name"] = RUNTIME
    data["spec"]["template"]["spec"]["failurePolicy"]["maxRestarts"] = 20
    return parse_manifests(yaml.safe_dump(data))[0]


def trainer_job(name: str, preset: Preset):
    data = _manifest("trainjob.yaml")
    data["metadata"]["name"] = name
    data["spec"]["runtimeRef"]["name"] = RUNTIME
    trainer = data["spec"]["trainer"]
    trainer["numNodes"] = WORKERS
    trainer["args"] = [*option_args(preset.options), "--ckpt-dir", f"/checkpoints/{name}"]
    if MEMORY_TIER:  # the node's memory beside the checkpoint volume, in the same runtime patch
        pod = data["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
        pod = pod["template"]["spec"]["template"]["spec"]
        pod["volumes"].append({"name": "node-memory",
                               "hostPath": {"path": "/dev/shm/kfcockpit", "type": "DirectoryOrCreate"}})
        pod["containers"][0]["volumeMounts"].append({"name": "node-memory", "mountPath": "/node-memory"})
        trainer["args"] += ["--memory-dir", f"/node-memory/{name}"]
    trainer["resourcesPerNode"] = {"requests": {"cpu": "1", "memory": preset.memory},
                                   "limits": {"cpu": "1", "memory": preset.memory}}
    return parse_manifests(yaml.safe_dump(data))[0]


def ray_job(name: str, preset: Preset, max_failures: int):
    data = _manifest("rayjob.yaml")
    data["metadata"]["name"] = name
    data["spec"]["entrypoint"] = " ".join(ray_train_argv(
        "python", num_workers=WORKERS, max_failures=max_failures, storage=f"/checkpoints/{name}", name=name,
        options=preset.options))
    return parse_manifests(yaml.safe_dump(data))[0]


async def on_cluster(cluster: Cluster, job, schedule: Schedule,
                     record: TextIO | None = None) -> tuple[GoodputReport, int]:
    name = job.metadata.name
    run = Run(schedule, record)
    await cluster.apply(job)

    async def kill(rank: int) -> bool:
        pods = [p for p in await cluster.list_pods(name) if p.rank == rank and p.phase == PodPhase.RUNNING]
        if not pods:
            return False
        try:
            await cluster.kill_pod(pods[0].name)
        except NotFound:
            return False
        return True

    async def watch_pods() -> None:  # each group's pods: when they were created and started
        async for event in cluster.watch_pods(name):
            run.model.observe_pod(event.pod)

    killer = asyncio.create_task(run.kills_on_schedule(kill))
    watcher = asyncio.create_task(watch_pods())
    try:
        async for batch in cluster.stream_logs(name):
            for line in batch:
                run.see(line.time, line.text)
    finally:
        killer.cancel()
        watcher.cancel()
    summary = await cluster.wait_job(name, frozenset({JobPhase.COMPLETE, JobPhase.FAILED}), 600)
    if summary.phase != JobPhase.COMPLETE:
        raise RuntimeError(f"{job.kind} {name} ended {summary.phase.value}: {summary.message}")
    run.model.finish(summary.finished or time.time())
    return run.model.report(), run.kills


# ---------------------------------------------------------------- plain torchrun


def torchrun_options(launcher: str, schedule: Schedule) -> list[str]:
    """torchrun's own options for one launch of `launcher` (a fresh call per launch: a relaunch
    gets a new rendezvous port and id)."""
    restarts = ["--nproc-per-node", str(WORKERS), "--max-restarts", str(schedule.kills + 2)]
    if launcher == "torchrun-standalone":
        return ["--standalone", *restarts]
    # "Fault tolerant" in torch/distributed/run.py's docstring: --max-restarts, an explicit
    # --rdzv-id, --rdzv-backend=c10d and --rdzv-endpoint; the timeouts are create_handler's
    # (elastic/rendezvous/dynamic_rendezvous.py), the interval the agent's (run.py --monitor-interval).
    return ["--nnodes", "1", *restarts, "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"{LOOPBACK}:{free_port()}", "--rdzv-id", f"goodput-{uuid.uuid4().hex[:8]}",
            "--rdzv-conf", C10D_RDZV_CONF, "--monitor-interval", C10D_MONITOR_INTERVAL]


async def on_torchrun(launcher: str, preset: Preset, schedule: Schedule, ckpt_dir: Path,
                      record: TextIO | None = None) -> tuple[GoodputReport, int, int]:
    """(report, kills, relaunches): torchrun --max-restarts, relaunched on a fresh store when its
    own restart fails or hangs."""
    def argv() -> list[str]:
        return with_python(ddp_command(*torchrun_options(launcher, schedule),
                                       args=[*option_args(preset.options), "--ckpt-dir", str(ckpt_dir)]),
                           sys.executable)

    env = C10D_ENV if launcher == "torchrun-c10d" else {}
    return await on_this_machine(argv, env, schedule, ckpt_dir, record, relaunches=schedule.kills + 2)


async def on_this_machine(argv: Callable[[], list[str]], env: dict[str, str], schedule: Schedule, scratch: Path,
                          record: TextIO | None, relaunches: int) -> tuple[GoodputReport, int, int]:
    """(report, kills, relaunches): a launcher run here as a process (`argv()` afresh for each
    launch), its ranks killed by the pids their start lines print; relaunched at most `relaunches`
    times when it exits failed or prints nothing for STALL_LIMIT."""
    run = Run(schedule, record)
    pids: dict[int, int] = {}
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", **env)
    scratch.mkdir(parents=True, exist_ok=True)

    async def kill(rank: int) -> bool:
        try:
            os.kill(pids[rank], signal.SIGKILL)
        except (KeyError, ProcessLookupError):
            return False
        return True

    killer = asyncio.create_task(run.kills_on_schedule(kill))
    launched = 0
    try:
        while True:
            marker = uuid.uuid4().hex
            errors = scratch / f"stderr-{launched}.txt"
            with errors.open("wb") as stderr:
                proc = await asyncio.create_subprocess_exec(
                    *argv(), cwd=REPO, env=dict(env, **{MARKER: marker}), start_new_session=True,
                    stdout=asyncio.subprocess.PIPE, stderr=stderr, limit=1 << 20)
                done = await _read_ranks(proc, run, pids)
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                sweep({MARKER: marker})
                code = await proc.wait()
            if done and code == 0:
                break
            if launched >= relaunches:
                said = errors.read_text(errors="replace").strip().splitlines()[-3:]
                raise RuntimeError(f"{' '.join(argv()[:3])} ... ended {code} after {launched} relaunch(es), "
                                   f"both ranks done: {done}; its stderr ended: {' | '.join(said)}")
            launched += 1
    finally:
        killer.cancel()
    run.model.finish(time.time())
    return run.model.report(), run.kills, launched


class WarmRay:
    """ray-warm's Ray cluster on this machine: started once per invocation, before any run is
    timed, and left up between runs, as a RayCluster is for the jobs KubeRay submits to it."""

    def __init__(self, temp_dir: Path):
        self.address = f"{LOOPBACK}:{free_port()}"
        self.temp_dir = temp_dir  # short: Ray's socket paths (training.ray_train.MAX_TEMP_DIR)
        self.marker = uuid.uuid4().hex  # every process of the cluster inherits it: how it is stopped

    async def up(self) -> None:
        # The Ray settings training.ray_train gives its private Ray, here the head's: its raylet
        # starts the workers and reads them, not the driver.
        env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", **RAY_ENV, **{MARKER: self.marker},
                   RAY_worker_maximum_startup_concurrency=str(WORKERS + GROUP_HELPER_ACTORS))
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--node-ip-address", LOOPBACK,
            "--port", self.address.rsplit(":", 1)[1], "--num-cpus", str(WORKERS), "--include-dashboard", "false",
            "--object-store-memory", str(80 * 1024 * 1024), "--temp-dir", str(self.temp_dir),
            "--disable-usage-stats", cwd=REPO, env=env, start_new_session=True,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        said, _ = await proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"ray start --head failed ({proc.returncode}): {said.decode(errors='replace')[-500:]}")

    def down(self) -> None:
        # By its marker, not `ray stop`: that stops every Ray on the machine, other people's too.
        sweep({MARKER: self.marker})
        shutil.rmtree(self.temp_dir, ignore_errors=True)


async def on_warm_ray(warm: WarmRay, preset: Preset, schedule: Schedule, run: int, scratch: Path,
                      record: TextIO | None) -> tuple[GoodputReport, int, int]:
    """The same entrypoint as the RayJob's, as the cluster's job supervisor runs a submitted job:
    on the head, with RAY_ADDRESS naming the cluster (training.ray_train then joins it instead of
    starting its own Ray). Ray restarts the group; a failed driver is not relaunched."""
    name = f"gp-{preset.name}-ray-warm-{run}"
    argv = ray_train_argv(sys.executable, num_workers=WORKERS, max_failures=schedule.kills + 2,
                          storage=str(scratch / "ray-warm"), name=name, options=preset.options)
    return await on_this_machine(lambda: argv, {"RAY_ADDRESS": warm.address}, schedule, scratch / name, record,
                                 relaunches=0)


async def _read_ranks(proc, run: Run, pids: dict[int, int]) -> bool:
    """Feed its lines until it exits (True if both ranks printed done) or its restart hangs."""
    done = set()
    while True:
        try:
            raw = await asyncio.wait_for(proc.stdout.readline(), STALL_LIMIT)
        except asyncio.TimeoutError:
            return False  # no line for STALL_LIMIT: a hung restart
        if not raw:
            return len(done) == WORKERS
        at, text = time.time(), raw.decode(errors="replace").rstrip("\n")
        fields = parse_line(text) if "=" in text else {}
        if fields.get("event") == "start" and fields.get("rank", "").isdigit():
            pids[int(fields["rank"])] = int(fields["pid"])
        elif fields.get("event") == "done":
            done.add(fields.get("rank"))
        run.see(at, text)


# ---------------------------------------------------------------- the table


def figures(report: GoodputReport, kills: int) -> dict[str, float]:
    """One run's figures, by the names COLUMNS sums them up under."""
    stall_share = (report.save_stall / report.step_seconds) if report.step_seconds else 0.0
    return {"goodput": report.goodput, **{part: getattr(report, part) for part in PARTS}, "total": report.total,
            "kills": kills, "restarts": report.restarts, "steps_lost": report.steps_lost,
            "step_ms": report.step_seconds * 1000, "save_share": 100 * stall_share}


COLUMNS = [("goodput", 3), *((part, 1) for part in PARTS), ("total", 1), ("kills", 0), ("restarts", 0),
           ("steps_lost", 0), ("step_ms", 0), ("save_share", 1)]
HEADERS = ["PRESET", "LAUNCHER", "GOODPUT", *(LABELS[p].upper() for p in PARTS), "WALL", "KILLS",
           "RESTARTS", "LOST STEPS", "STEP MS", "SAVE/STEP %", "NOTE"]
RESTART_HEADERS = ["PRESET", "LAUNCHER", "RUN", "RESTART", "FAILURE->STEP", "BEYOND A STEP",
                   *(STAGE_LABELS[name].upper() for name in STAGE_LABELS)]


def restart_rows(launcher: str, preset: Preset, run: int, report: GoodputReport) -> list[list[str]]:
    """Each restart taken apart: the seconds between its points, and what it cost beyond the
    ordinary step it replaced (the goal: 2 s at most)."""
    rows = []
    for restart in report.restart_times:
        stages = dict(restart.stages())
        took = restart.seconds
        rows.append([preset.name, launcher, str(run), str(restart.attempt), "?" if took is None else f"{took:.2f}",
                     "?" if took is None else f"{took - report.step_seconds:.2f}",
                     *(f"{stages[name]:.2f}" if name in stages else "-" for name in STAGE_LABELS)])
    return rows


async def one_run(cluster: Cluster, warm: WarmRay | None, launcher: str, preset: Preset, run: int,
                  schedule: Schedule, scratch: Path, record: TextIO | None) -> tuple[GoodputReport, int, int]:
    """(report, kills, relaunches) of one run of one configuration; every run has names of its own
    (a TrainJob or Ray run that finds its checkpoints from before resumes them)."""
    if launcher == "trainer":
        report, kills = await on_cluster(cluster, trainer_job(f"gp-{preset.name}-{run}", preset), schedule, record)
        return report, kills, 0
    if launcher == "ray":
        job = ray_job(f"gp-{preset.name}-ray-{run}", preset, schedule.kills + 2)
        report, kills = await on_cluster(cluster, job, schedule, record)
        return report, kills, 0
    if launcher == "ray-warm":
        return await on_warm_ray(warm, preset, schedule, run, scratch, record)
    return await on_torchrun(launcher, preset, schedule, scratch / f"{launcher}-{preset.name}-{run}", record)


async def measure(args: argparse.Namespace, schedule: Schedule, home: Path, scratch: Path,
                  record: TextIO | None) -> tuple[list[list[str]], list[list[str]], list[str]]:
    """(table rows, restart rows, verdicts): run r of every launcher before run r + 1 of any, so
    what loads the machine meanwhile falls on all of them alike."""
    rows, restarts, verdicts = [], [], []
    embedded = Embedded(home)
    cluster = None
    warm = WarmRay(Path(tempfile.mkdtemp(prefix="kfg-ray-", dir="/tmp"))) if "ray-warm" in args.launchers else None
    try:
        if warm is not None:
            await warm.up()
        await embedded.up()
        cluster = await asyncio.to_thread(connect, Settings(home=home))  # the one client path
        for resource in parse_manifests((MANIFESTS / "volume.yaml").read_text()):
            await cluster.apply(resource)
        await cluster.apply(goodput_runtime())
        # The cluster as a user's is once its runtime is installed: warm workers ready (ray-warm's
        # Ray likewise starts before any timing). Without this wait the first timed run also
        # paid the zygote's import of torch, 2.5 s of start-up the later runs never saw.
        await embedded.warmed()
        for preset in presets(schedule, args.presets):
            runs: dict[str, list[dict[str, float]]] = {launcher: [] for launcher in args.launchers}
            relaunched: dict[str, list[int]] = {launcher: [] for launcher in args.launchers}
            for run in range(1, args.runs + 1):
                for launcher in args.launchers:
                    print(f"{preset.name} / {launcher} / run {run} of {args.runs}: {preset.options['steps']} steps, "
                          f"{schedule.kills} kills every {schedule.every:g}s ...", flush=True)
                    started = time.time()
                    if record is not None:
                        record.write(json.dumps({"run": f"{preset.name}/{launcher}/{run}"}) + "\n")
                    report, kills, relaunches = await one_run(cluster, warm, launcher, preset, run, schedule,
                                                              scratch, record)
                    runs[launcher].append(figures(report, kills))
                    relaunched[launcher].append(relaunches)
                    restarts += restart_rows(launcher, preset, run, report)
                    print(f"  {report.one_line()}  [{time.time() - started:.0f}s]", flush=True)
            for launcher in args.launchers:
                note = ""
                if any(relaunched[launcher]):
                    note = "relaunch(es) on a fresh store, per run: " + ",".join(map(str, relaunched[launcher]))
                rows.append([preset.name, launcher, *summary_cells(runs[launcher], COLUMNS), note])
            if "trainer" in runs:
                verdicts.append(verdict(preset.name, {launcher: [figure["goodput"] for figure in measured]
                                                      for launcher, measured in runs.items()}))
    finally:
        if cluster is not None:
            await cluster.close()
        await embedded.down()
        if warm is not None:
            warm.down()
    return rows, restarts, verdicts


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="two kills 20 s apart, tiny state only")
    p.add_argument("--presets", help="comma-separated: tiny,1gb (default: both; --quick: tiny)")
    p.add_argument("--launchers", default=",".join(LAUNCHERS),
                   help="comma-separated configurations (default: all: %(default)s)")
    p.add_argument("--runs", type=int, help="runs of each configuration, interleaved (default 1; --quick 3)")
    p.add_argument("--kills", type=int, help="kills per run (default 5; --quick 2)")
    p.add_argument("--every", type=float, help="seconds between kills (default 60; --quick 20)")
    p.add_argument("--lines", type=Path, metavar="FILE",
                   help="also write every worker line and kill, with its time, to FILE as JSON lines")
    args = p.parse_args()
    args.presets = (args.presets or ("tiny" if args.quick else "tiny,1gb")).split(",")
    args.launchers = args.launchers.split(",")
    args.runs = args.runs if args.runs is not None else (3 if args.quick else 1)
    unknown = [name for name in args.launchers if name not in LAUNCHERS]
    if unknown:
        p.error(f"unknown launcher(s) {','.join(unknown)}; choose from {','.join(LAUNCHERS)}")
    if bad := [name for name in args.presets if name not in PRESETS]:
        p.error(f"unknown preset(s) {','.join(bad)}; choose from {','.join(PRESETS)}")
    if args.runs < 1:
        p.error("--runs must be at least 1")
    schedule = Schedule(kills=args.kills or (2 if args.quick else 5),
                        every=args.every or (20.0 if args.quick else 60.0))
    home = Path(tempfile.mkdtemp(prefix="kfg-", dir="/tmp"))  # short: Ray's socket paths
    scratch = Path(tempfile.mkdtemp(prefix="kfg-torchrun-", dir="/tmp"))
    record = args.lines.open("w") if args.lines else None
    try:
        rows, restarts, verdicts = asyncio.run(measure(args, schedule, home, scratch, record))
    finally:
        if record is not None:
            record.close()
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    from tui.cli.common import print_table

    print()
    print(f"kills: {schedule.kills} of a random worker (ranks {schedule.ranks()}), every {schedule.every:g}s "
          f"from the first step; each figure the median of {args.runs} run(s), (min-max) where they differ; "
          f"seconds unless noted; SAVE/STEP = a periodic save's hold on the loop / mean step")
    print_table(HEADERS, rows)
    print()
    print("each restart, from the failure seen to the new group's first step ('-': not seen by that launcher)")
    print_table(RESTART_HEADERS, restarts)
    for said in verdicts:
        print(said)


if __name__ == "__main__":
    main()
