"""The GPU variant of the lesson's TrainJob (manifests/trainjob-gpu.yaml) on an embedded cluster of
two nodes with two simulated GPUs each (`cluster up --nodes 2 --gpus-per-node 2`), shared by the
tests here. Its pods see their GPUs as on a GPU node: Trainer's `PET_NPROC_PER_NODE=auto` starts
one process per GPU the pod was given (torchrun's determine_local_world_size counts the devices a
pod sees; the kubelet counts simulated ones, devices.py), each LOCAL_RANK holds its own device id,
and the pod's log says once that the devices are simulated (`--device cuda` trains on the CPU).
Two GPUs per pod on two nodes train world 4, one GPU per pod world 2; a pod of the world-4 job
killed restarts the group once and the job ends bitwise equal to an uninterrupted world-4 run.
That killed run is driven and read in the cockpit, as a learner would, so one run also shows
several ranks in a pod there (it was a run of its own: the suite's time is its real processes)."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
import yaml

from backend.connect import connect
from backend.local.embedded import Embedded
from backend.local.node.devices import machine_gpus
from backend.local.node.podspec import ENV_CLUSTER
from backend.models import JobPhase, parse_manifests
from backend.processes import sweep
from backend.project import MANIFESTS
from backend.settings import Settings
from tests.local.conftest import WAIT, cli, kubectl
from tests.tui.conftest import connected, make_app, wait_until
from training.logfmt import parse_line

pytestmark = pytest.mark.skipif(bool(machine_gpus()), reason="this machine has GPUs: they are real, not simulated")

COMPLETE = frozenset({JobPhase.COMPLETE})
STEPS, KILL_AT = 30, 10
GPU_JOB = MANIFESTS / "trainjob-gpu.yaml"


@pytest.fixture(scope="module")
def gpu_nodes(tmp_path_factory):
    """One cluster for the module: its jobs run one after another (each takes the GPUs it needs)."""
    home = tmp_path_factory.mktemp("gpu") / "home"
    up = cli(home, "cluster", "up", "--nodes", "2", "--gpus-per-node", "2")
    assert up.returncode == 0, up.stderr
    applied = kubectl(home, "apply", "-f", str(MANIFESTS / "runtime.yaml"), "-f", str(MANIFESTS / "volume.yaml"))
    assert applied.returncode == 0, applied.stderr
    yield home
    cli(home, "cluster", "down")
    sweep({ENV_CLUSTER: str(Embedded(home).layout.root)})


@pytest.fixture
async def cluster(gpu_nodes):
    cluster = await asyncio.to_thread(connect, Settings(home=gpu_nodes))
    yield cluster
    await cluster.close()


def gpu_job(name: str, gpus: int, steps: int, step_delay: float):
    """manifests/trainjob-gpu.yaml with `gpus` per node and a run of its own."""
    data = yaml.safe_load(GPU_JOB.read_text())
    data["metadata"]["name"] = name
    for field in ("requests", "limits"):
        data["spec"]["trainer"]["resourcesPerNode"][field]["nvidia.com/gpu"] = gpus
    args = data["spec"]["trainer"]["args"]
    for flag, value in (("--steps", steps), ("--step-delay", step_delay), ("--ckpt-dir", f"/checkpoints/{name}")):
        args[args.index(flag) + 1] = str(value)
    (job,) = parse_manifests(yaml.safe_dump(data))
    return job


def pod_ranks(home, job: str) -> dict[int, list[dict]]:
    """Node rank -> the start lines of its pod's ranks (the finished attempt's pods), each pod's
    log checked to say once that its GPUs are simulated."""
    pods = json.loads(kubectl(home, "get", "pods", "-l", f"jobset.sigs.k8s.io/jobset-name={job}",
                              "-o", "json").stdout)["items"]
    found = {}
    for pod in pods:
        log = kubectl(home, "logs", pod["metadata"]["name"]).stdout
        told = [line for line in log.splitlines() if "simulated GPU(s) GPU-" in line]
        assert len(told) == 1 and "training on the CPU" in told[0], log[-2000:]
        starts = [parse_line(line) for line in log.splitlines() if line.startswith("event=start ")]
        node_rank = int(pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"])
        found[node_rank] = sorted(starts, key=lambda s: int(s["local_rank"]))
    return found


def _metrics(home, run: str) -> dict:
    return json.loads((Embedded(home).layout.claim_dir("default", "checkpoints") / run / "metrics.json").read_text())


async def test_two_gpus_per_pod_train_world_4_and_a_killed_pod_resumes_bitwise_equal(cluster, gpu_nodes):
    home = gpu_nodes
    plan = dict(gpus=2, steps=STEPS, step_delay=0.1)
    await cluster.apply(gpu_job("straight", **plan))
    straight = await cluster.wait_job("straight", COMPLETE, WAIT)
    assert straight.phase == JobPhase.COMPLETE and straight.restart_attempt == 0
    ranks = pod_ranks(home, "straight")
    assert sorted(ranks) == [0, 1]
    for node_rank, starts in ranks.items():  # two processes per pod, each on its own GPU
        assert [(s["rank"], s["world"], s["node_rank"], s["local_rank"], s["local_world"], s["gpu"])
                for s in starts] == [(str(2 * node_rank + local), "4", str(node_rank), str(local), "2", str(local))
                                     for local in (0, 1)]

    await killed_in_the_cockpit(home, gpu_job("killed", **plan))
    killed = await cluster.wait_job("killed", COMPLETE, WAIT)
    assert killed.phase == JobPhase.COMPLETE and killed.restart_attempt == 1
    assert sorted(len(starts) for starts in pod_ranks(home, "killed").values()) == [2, 2]
    reference, restarted = _metrics(home, "straight"), _metrics(home, "killed")
    assert (reference["world_size"], reference["resumes"], restarted["resumes"]) == (4, 0, 1)
    assert restarted["params_sha256"] == reference["params_sha256"]
    assert restarted["loss_history"] == reference["loss_history"]


async def killed_in_the_cockpit(home, job) -> None:
    """Several ranks in a pod, as the cockpit shows them (issue 43): the world-4 job applied, one
    pod killed from the pods panel, followed to its end. Four ranks: log prefixes that are the
    lines' own `rank=`, a pod row per rank with its step, no restart before a real one (two ranks'
    lines of one pod once read as one rank going back a step: a restart marked at every step),
    and the pod killed is its two ranks gone and one restart counted."""
    name = job.metadata.name
    app = make_app(home)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = app.screen
        await connected(screen)
        await screen.session.cluster.apply(job)
        await wait_until(screen, lambda: screen.following.followed == name, "the cockpit to follow the job")
        buffer, table = screen.log_view.buffer, screen.pods_table
        await wait_until(screen, lambda: any(step >= KILL_AT for step, _ in table.steps.values())
                         and len(table.steps) == 2, f"step {KILL_AT}")
        assert screen.loss_chart.restarts.get(name, set()) == set()  # two ranks a pod are no restart
        victim = next(p.name for p in table.pods.values() if list(p.ranks) == [2, 3])
        await screen.pod_actions.kill(victim).wait()
        assert any(f"killed {victim} (ranks 2-3)" in n.message for n in app._notifications)

        def done() -> bool:
            summary = screen.following.jobs.get(name)
            steps = screen.pods_table.steps
            live = [p.name for p in table.pods.values() if p.restart_attempt == 1]
            return summary is not None and summary.phase.finished and len(live) == 2 \
                and all(steps.get(pod, (0,))[0] == STEPS for pod in live)

        await wait_until(screen, done, "the job to finish with both pods at the last step", timeout=WAIT)
        assert screen.following.jobs[name].phase.value == "Complete"
        assert sorted(buffer.ranks) == [0, 1, 2, 3]
        for shown in buffer:
            said = re.search(r"(?:^| )rank=(\d+)", shown.partition(" | ")[2])
            if " | " in shown and said:
                assert shown.startswith(f"r{said.group(1)} | "), shown
        await pilot.pause()
        rank, step = (table.shown_columns.index(key) for key in ("rank", "step"))
        rows = [(table.get_row_at(i)[rank].plain, table.get_row_at(i)[step].plain) for i in range(table.row_count)]
        assert sorted(rows[:4]) == [(str(r), str(STEPS)) for r in range(4)]  # the new group on top, a row per rank
        assert len(screen.loss_chart.restarts[name]) == 1  # one marker: where the new group resumed
        [restart] = screen.timeline.model.restarts()
        assert "(ranks 2-3)" in restart.moments[0].what
        assert screen.timeline.model.goodput_report(screen.clock()).restarts == 1


async def test_the_gpu_trainjob_as_is_trains_world_2_one_process_per_gpu(cluster, gpu_nodes):
    home = gpu_nodes
    (job,) = parse_manifests(GPU_JOB.read_text())
    await cluster.apply(job)
    done = await cluster.wait_job(job.metadata.name, COMPLETE, WAIT)
    assert done.phase == JobPhase.COMPLETE, kubectl(home, "get", "pods", "-o", "wide").stdout
    ranks = pod_ranks(home, job.metadata.name)
    assert {n: [(s["rank"], s["world"], s["local_rank"], s["local_world"], s["gpu"]) for s in starts]
            for n, starts in ranks.items()} == {0: [("0", "2", "0", "1", "0")], 1: [("1", "2", "0", "1", "0")]}
    pods = json.loads(kubectl(home, "get", "pods", "-l", f"jobset.sigs.k8s.io/jobset-name={job.metadata.name}",
                              "-o", "json").stdout)["items"]
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["kfcockpit-worker", "kfcockpit-worker2"]
