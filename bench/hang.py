"""A hung rank: how soon each watcher knows, measured in one run on the embedded cluster.

The lesson's TrainJob (two workers) trains; once it steps, rank 1's pod is frozen (`kfcockpit pod
freeze`: every process stopped, the pod still Running, as a frozen machine leaves a rank). From
that moment the bench times:

  cockpit      the hang detector the cockpit and `kfcockpit goodput` run (backend/hangs.py), fed
               the job's lines and pods as the cockpit is, asked once a second
  collective   the training loop's own --collective-timeout: rank 0's all-reduce gives up and its
               pod fails, which is when the platform (JobSet's failure policy) first sees anything
  watchdog     torch's default collective timeout, which a job without --collective-timeout waits
               out (gloo's and NCCL's process-group default, read from torch): not waited for here

    .venv/bin/python bench/hang.py                         # --collective-timeout 60s
    .venv/bin/python bench/hang.py --collective-timeout 2m --hang-multiple 5
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backend.compare import resources  # noqa: E402
from backend.connect import connect  # noqa: E402
from backend.hangs import DEFAULT_FLOOR, DEFAULT_MULTIPLE, HangRule, HangWatch  # noqa: E402
from backend.local.embedded import Embedded  # noqa: E402
from backend.models import PodPhase, parse_manifests  # noqa: E402
from backend.project import MANIFESTS  # noqa: E402
from backend.settings import Settings  # noqa: E402

JOB = "hang-bench"


def hang_job(collective_timeout: str):
    data = yaml.safe_load((MANIFESTS / "trainjob.yaml").read_text())
    data["metadata"]["name"] = JOB
    args = data["spec"]["trainer"]["args"]
    args[args.index("--steps") + 1] = "100000"
    args[args.index("--step-delay") + 1] = "0.05"
    args[args.index("--ckpt-dir") + 1] = f"/checkpoints/{JOB}"
    args += ["--collective-timeout", collective_timeout]
    return parse_manifests(yaml.safe_dump(data))[0]


def torch_default_timeout() -> float:
    from torch.distributed import constants

    return constants.default_pg_timeout.total_seconds()


async def measure(cluster, rule: HangRule, collective_timeout: str) -> dict[str, float | None]:
    for resource in (resources.runtime(), resources.volume("checkpoints")):  # the lesson's, as committed
        await cluster.apply(resource)
    await cluster.apply(hang_job(collective_timeout))
    watch = HangWatch(rule)
    times: dict[str, float | None] = {"frozen": None, "cockpit": None, "collective": None}
    stepping = asyncio.Event()

    async def lines() -> None:
        async for batch in cluster.stream_logs(JOB):
            watch.lines(batch)
            if any(line.step is not None and line.step >= 20 for line in batch):
                stepping.set()

    async def pods() -> None:
        async for event in cluster.watch_pods(JOB):
            watch.pod(event.pod)
            if times["frozen"] is not None and event.pod.phase == PodPhase.FAILED and times["collective"] is None:
                times["collective"] = time.time()  # rank 0 gave up: the first failure anyone sees
                return

    tasks = [asyncio.create_task(lines()), asyncio.create_task(pods())]
    try:
        await asyncio.wait_for(stepping.wait(), 300)
        (victim,) = [p.name for p in await cluster.list_pods(JOB) if p.rank == 1 and p.phase == PodPhase.RUNNING]
        await cluster.freeze_pod(victim, True)
        times["frozen"] = time.time()
        print(f"froze {victim} (rank 1) at step >= 20", flush=True)
        while times["collective"] is None:
            if times["cockpit"] is None and watch.check(time.time()) is not None:
                times["cockpit"] = time.time()
                print(f"  cockpit: {watch.check(time.time()).one_line()}", flush=True)
            await asyncio.sleep(1.0)  # the cockpit asks its detector once a second
            if tasks[1].done():
                break
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return times


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--collective-timeout", default="60s", help="the training loop's (default %(default)s)")
    p.add_argument("--hang-multiple", type=float, default=DEFAULT_MULTIPLE)
    p.add_argument("--hang-floor", type=float, default=DEFAULT_FLOOR)
    args = p.parse_args()
    home = Path(tempfile.mkdtemp(prefix="kfh-", dir="/tmp"))
    settings = Settings(home=home)

    async def run() -> dict:
        cluster = connect(settings)
        try:
            return await measure(cluster, HangRule(args.hang_multiple, args.hang_floor), args.collective_timeout)
        finally:
            await cluster.close()
            await Embedded(home).down()

    try:
        times = asyncio.run(run())
    finally:
        shutil.rmtree(home, ignore_errors=True)
    frozen = times["frozen"]
    if frozen is None:
        print("hang: the job never stepped; nothing measured", file=sys.stderr)
        return 1

    def after(at: float | None) -> str:
        return f"{at - frozen:.1f}" if at is not None else "not seen"

    rule = HangRule(args.hang_multiple, args.hang_floor).describe()
    rows = [("cockpit hang detector", after(times["cockpit"]), f"rule: {rule}"),
            ("--collective-timeout", after(times["collective"]), f"{args.collective_timeout}: rank 0's pod fails"),
            ("torch's default timeout", f"{torch_default_timeout():.0f}",
             "gloo/NCCL process-group default: not waited for")]
    from tui.cli.common import print_table

    print()
    print_table(["WHO KNOWS", "SECONDS AFTER THE FREEZE", "HOW"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
