"""Several ranks in one pod (torchrun's processes per node: one per GPU on a real node), fed to the
cockpit's models as the screen feeds them: a rank is its own line's `rank=` and its pod's PET_*
environment, never the pod's index alone (issue 43). Two pods of two ranks each: world 4."""

from __future__ import annotations

from textual.app import App, ComposeResult

from backend.hangs import HangRule, HangWatch
from backend.kube.pods import pod_from
from backend.models import LogLine, Pod, PodEvent, PodEventType, PodPhase
from tui.model.log_buffer import LogBuffer, LogFilter
from tui.model.timeline import FailureTimeline
from tui.widgets.loss_chart import LossChart
from tui.widgets.pods_table import PodsTable

PODS = ("job-node-0-0-aaaaa", "job-node-0-1-bbbbb")  # node ranks 0 and 1, ranks 0-1 and 2-3


def pod(node_rank: int, phase: PodPhase = PodPhase.RUNNING, attempt: int = 0) -> Pod:
    return Pod(name=PODS[node_rank], job="job", rank=node_rank, procs=2, restart_attempt=attempt, phase=phase,
               created=50.0)


def steps(first: int, last: int, at: float = 100.0) -> list[LogLine]:
    """What the merged log brings: each pod's log with its two ranks' lines, as a pod's log is
    read with its index as the rank of the lines that do not say theirs."""
    return [LogLine.parsed(PODS[rank // 2], rank // 2 * 2, at + n * 0.1 + rank * 0.001,
                           f"step={n} loss={1 / n:.6f} rank={rank} world=4")
            for n in range(first, last + 1) for rank in range(4)]


def test_a_line_is_its_rank_and_a_pod_runs_the_ranks_its_environment_says():
    line = LogLine.parsed(PODS[1], 2, 1.0, "step=5 loss=0.5 rank=3 world=4")
    assert (line.rank, line.step) == (3, 5)
    assert LogLine.parsed(PODS[1], 2, 1.0, "[rank3]: Traceback (most recent call last):").rank == 2
    assert LogLine.parsed(PODS[1], 2, 1.0, "event=start local_rank=1 world=4").rank == 2  # not rank=
    raw = {"metadata": {"name": PODS[1], "creationTimestamp": "2026-01-01T00:00:00Z",
                        "labels": {"batch.kubernetes.io/job-completion-index": "1",
                                   "jobset.sigs.k8s.io/jobset-name": "job",
                                   "jobset.sigs.k8s.io/jobset-uid": "uid-1"}},
           "spec": {"containers": [{"name": "node", "env": [{"name": "PET_NPROC_PER_NODE", "value": "2"}]}]}}
    seen = pod_from(raw)
    assert list(seen.ranks) == [2, 3] and seen.job_uid == "uid-1"
    # numProcPerNode "auto" (the GPU runtime): one per GPU the pod was given, as torchrun's auto
    raw["spec"]["containers"][0].update(env=[{"name": "PET_NPROC_PER_NODE", "value": "auto"}],
                                        resources={"limits": {"nvidia.com/gpu": "2"}})
    assert list(pod_from(raw).ranks) == [2, 3]


def test_the_log_prefix_is_the_lines_rank_not_the_pods_index():
    buffer = LogBuffer(100)
    shown = buffer.add(steps(1, 1), LogFilter())
    assert [line for line in shown if " | " in line] == [
        f"r{r} | step=1 loss=1.000000 rank={r} world=4" for r in range(4)]
    assert list(buffer.ranks) == [0, 1, 2, 3]
    assert [line.split(" | ")[0] for line in buffer.matching(LogFilter(rank=3))] == ["r3"]


class Apps(App):
    def compose(self) -> ComposeResult:
        yield PodsTable(clock=lambda: 100.0, redraw_seconds=0)
        yield LossChart()


async def test_two_ranks_in_a_pod_are_no_restart_and_a_pod_row_names_its_ranks():
    app = Apps()
    async with app.run_test(size=(120, 40)) as pilot:
        chart = app.query_one(LossChart)
        chart.follow_run("job")
        chart.add_lines(steps(1, 30))
        assert chart.restarts["job"] == set()  # was {1, 2, … 29}: every step of rank 1 read as a resume
        assert sorted(chart.series["job"]) == list(range(1, 31))
        table = app.query_one(PodsTable)
        table.reset("job")
        for node_rank in (0, 1):
            table.apply(PodEvent(type=PodEventType.ADDED, pod=pod(node_rank)))
        table.progress(steps(1, 30)[:-1])  # rank 3's step 30 not read yet: its pod is at 29
        await pilot.pause()
        rows = [(table.get_row_at(i)[0].plain, table.get_row_at(i)[1].plain, table.get_row_at(i)[6].plain)
                for i in range(table.row_count)]
        first, second = (table.pod_label(pod) for pod in PODS)
        # a row per rank, each with its own STEP
        assert rows == [(first, "0", "30"), (first, "1", "30"), (second, "2", "30"), (second, "3", "29")]
        table.move_cursor(row=3)
        assert table.selected_pod == PODS[1]  # rank 3's row selects its pod (a kill takes ranks 2-3)
        assert table.ranks_of(PODS[1]) == "ranks 2-3"
        table.move_cursor(row=0)
        assert table.go_to(3) == PODS[1]  # g 3: the pod that runs rank 3, the cursor on rank 3's row
        await pilot.pause()
        assert table.cursor_row == 3


def test_the_hang_detector_counts_ranks_and_needs_every_pod_of_the_newest_attempt_running():
    watch = HangWatch(HangRule(multiple=5, floor=1.0))
    for node_rank in (0, 1):
        watch.pod(pod(node_rank))
    watch.lines(steps(1, 10) + [line for line in steps(11, 11) if line.rank != 3])
    hang = watch.check(now=150.0)
    assert hang is not None and hang.stopped == (3,) and hang.running == (0, 1, 2, 3)
    # a node lost: the new group's pod 1 waits for a node while pod 0 runs: silence with a reason
    watch.pod(pod(0, attempt=1))
    watch.pod(pod(1, PodPhase.PENDING, attempt=1))
    assert watch.check(now=150.0) is None
    # both run again; the old group's step is no measure of the new one's silence
    watch.pod(pod(1, attempt=1))
    assert watch.check(now=150.0) is None
    watch.lines(steps(8, 8, at=200.0))
    assert watch.check(now=200.9) is None
    assert watch.check(now=230.0) is not None  # a frozen group after it stepped again is a hang


def test_a_failed_pod_names_its_ranks_in_the_timeline():
    t = FailureTimeline("job")
    for node_rank in (0, 1):
        t.pod_event(PodEvent(type=PodEventType.ADDED, pod=pod(node_rank)), 50.0)
    t.add_lines(steps(1, 5))
    t.pod_event(PodEvent(type=PodEventType.MODIFIED, pod=pod(1, PodPhase.FAILED).model_copy(
        update={"reason": "Error", "exit_code": 1, "finished": 101.0})), 101.0)
    [restart] = t.restarts()
    assert restart.moments[0].what == "failure seen: pod 1-bbbbb (ranks 2-3) Error, exit 1"
    assert t.silence() == "restarting: pod 1-bbbbb (ranks 2-3) Error, exit 1, the group is torn down"


def test_the_group_summary_counts_ranks_not_pods():
    from tui.model.rank_group import summarize

    pods = {p.name: p for p in (pod(0), pod(1, PodPhase.PENDING))}
    group = summarize(pods, {}, attempt=0)
    assert group.size == 4 and group.pods == 2
    assert group.rows()[0][0] == "attempt 0 · 4 ranks in 2 pods: 1 Running · 1 Pending"


def test_the_group_summary_names_a_pods_ranks_not_its_index():
    from tui.model.rank_group import summarize

    failed = pod(1, PodPhase.FAILED)
    failed.reason, failed.exit_code = "OOMKilled", 137
    rows = [text for text, _ in summarize({p.name: p for p in (pod(0), failed)}, {}, attempt=0).rows()]
    assert any(row.startswith("failed: ranks 2-3 ") for row in rows), rows


def test_a_stopped_rank_has_its_pods_logs_read():
    from backend.hangs import Hang
    from tui.model.rank_group import ranks_to_show, summarize

    pods = {p.name: p for p in (pod(0), pod(1))}
    hang = Hang(step=9, silent=30.0, usual=0.1, limit=10.0, stopped=(3,), waiting=(0, 1, 2), running=(0, 1, 2, 3))
    assert ranks_to_show(summarize(pods, {}, attempt=0, hang=hang)) == [0, 1]  # pod 1 runs rank 3


def test_a_ray_drivers_forwarded_worker_lines_stay_the_drivers():
    from backend.models import DRIVER_RANK

    forwarded = "(RayTrainWorker pid=7) step=3 loss=0.5 rank=1 world=2"  # log_to_driver: read from its pod too
    assert LogLine.parsed("lesson-ray-driver-x", DRIVER_RANK, 1.0, forwarded).rank == DRIVER_RANK
