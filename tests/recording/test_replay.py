"""The replay: the shipped recordings still load, a ReplayCluster plays a recording's streams at
their recorded times scaled by the speed (on a virtual clock: no waiting, no wall time), answers
reads as of the playhead, and refuses in one line what would change a cluster."""

from __future__ import annotations

import asyncio
import gzip
import json

import pytest

from backend.goodput.job import measure_job
from backend.models import JobPhase
from backend.recording.format import FORMAT_VERSION, BadRecording, load
from backend.recording.playhead import Playhead
from backend.errors import Unavailable
from backend.recording.replay import ReadOnly, ReplayCluster
from tests.recording.conftest import KILL_AND_RESUME, NODE_FAILURE, SHIPPED, cut
from tests.recording.virtual_time import VirtualTime
from tui.cli import main

STREAMS = ("watch_jobs", "watch_pods", "watch_nodes", "watch_events", "stream_logs")


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_the_shipped_recordings_load_and_hold_a_restarted_two_rank_job(path):
    with gzip.open(path, "rt") as f:
        assert json.loads(f.readline())["format"] == FORMAT_VERSION
    recording = load(path)
    assert recording.how == "the job ended" and not recording.dropped
    jobs = [e.value for e in recording.streamed("watch_jobs")]
    assert jobs[-1].phase == JobPhase.COMPLETE and jobs[-1].restart_attempt >= 1
    pods = {e.value.pod.name: e.value.pod for e in recording.streamed("watch_pods")}
    assert {p.rank for p in pods.values()} == {0, 1}
    assert {p.restart_attempt for p in pods.values()} >= {0, 1}  # the first group's pods, the killed one's too
    assert any(p.phase.value == "Failed" for p in pods.values())


def test_the_node_failure_recording_holds_the_node_going_not_ready():
    nodes = [e.value.node for e in load(NODE_FAILURE).streamed("watch_nodes")]
    assert len({n.name for n in nodes}) == 3 and all(n.gpus == 2 for n in nodes)
    assert any(n.ready != "True" for n in nodes)


@pytest.mark.parametrize("speed", [1.0, 4.0])
async def test_every_stream_plays_each_item_at_its_recorded_time_over_the_speed(speed):
    recording = load(KILL_AND_RESUME)
    clock = VirtualTime()
    replay = ReplayCluster(recording, Playhead(recording.ended, speed, monotonic=clock.monotonic,
                                               sleep=clock.sleep))
    seen: dict[str, list[float]] = {}

    async def play(stream: str) -> None:
        expected = len(list(recording.streamed(stream)))
        opened = replay.stream_logs(recording.job) if stream == "stream_logs" else getattr(replay, stream)()
        seen[stream] = []
        if expected:
            async for _ in opened:
                seen[stream].append(clock.now)
                if len(seen[stream]) == expected:
                    break

    everything = asyncio.gather(*(play(s) for s in STREAMS))
    await clock.run_until(everything)
    await everything
    for stream in STREAMS:
        recorded = [e.at / speed for e in recording.streamed(stream)]
        assert seen[stream] == pytest.approx(recorded, abs=1e-6), stream
    last = max(e.at for e in recording.entries if e.stream)
    assert clock.now == pytest.approx(last / speed)  # at 4x, a quarter of the recorded time
    assert await replay.get_job(recording.job) == [e.value for e in recording.streamed("watch_jobs")][-1]


async def test_reads_answer_as_of_the_playhead_and_the_end_measures_the_recorded_job():
    recording = load(KILL_AND_RESUME)
    clock = VirtualTime()
    playhead = Playhead(recording.ended, monotonic=clock.monotonic, sleep=clock.sleep)
    replay = ReplayCluster(recording, playhead)
    assert [j.phase for j in await replay.list_jobs()] in ([], [JobPhase.RUNNING])
    playhead.seek(recording.ended)
    measured = await measure_job(replay, recording.job)
    assert measured.summary.phase == JobPhase.COMPLETE and measured.summary.restart_attempt == 1
    assert measured.goodput.restarts == 1 and 0 < measured.goodput.goodput < 1
    playhead.seek(0.0)  # going back: what was current then
    assert (await replay.get_job(recording.job)).phase != JobPhase.COMPLETE


async def test_a_replay_refuses_every_change_in_one_line_and_says_so_in_its_capabilities():
    replay = ReplayCluster(load(KILL_AND_RESUME), Playhead(1.0))
    assert "a replay of kill-and-resume.kfrec.gz" in replay.capabilities.read_only
    assert replay.capabilities.fail_node is None and not replay.capabilities.freezes_pods
    for change in (replay.kill_pod("p"), replay.freeze_pod("p", True), replay.cordon_node("n", True),
                   replay.snapshot("v", "s"), replay.delete("TrainJob", "j")):
        with pytest.raises(ReadOnly) as refused:
            await change
        assert "\n" not in str(refused.value) and "replay" in str(refused.value)


def _write(path, rows) -> None:
    with gzip.open(path, "wt") as f:
        f.writelines(json.dumps(row) + "\n" for row in rows)


def test_bad_truncated_and_newer_recordings_are_one_line_and_exit_2(tmp_path, capsys):
    header = {"kind": "kfcockpit-recording", "format": FORMAT_VERSION, "job": "j", "cluster": "c",
              "started": 0.0, "limits": {}}
    not_gzip = tmp_path / "notes.kfrec.gz"
    not_gzip.write_text("hello")
    newer = tmp_path / "newer.kfrec.gz"
    _write(newer, [dict(header, format=FORMAT_VERSION + 1), {"end": 1.0}])
    no_end = tmp_path / "no-end.kfrec.gz"
    _write(no_end, [header, {"t": 0.1, "s": "watch_jobs", "v": None}])
    alien = tmp_path / "alien.kfrec.gz"
    _write(alien, [header, {"t": 0.1, "s": "watch_jobs", "v": {"$": "os.system", "v": "x"}}, {"end": 1.0}])
    cases = {
        not_gzip: "not a kfcockpit recording",
        cut(KILL_AND_RESUME, tmp_path / "cut.kfrec.gz"): "cut short",
        newer: f"newer than this kfcockpit's ({FORMAT_VERSION})",
        no_end: "cut short (no end)",
        alien: "unknown type",
        tmp_path / "absent.kfrec.gz": "no such file",
    }
    for path, said in cases.items():
        with pytest.raises(BadRecording, match=said.replace("(", r"\(").replace(")", r"\)")):
            load(path)
        assert main(["replay", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and said in err and "Traceback" not in err, err
    assert main(["replay", str(KILL_AND_RESUME), "--from", "99999"]) == 2
    assert "the recording is" in capsys.readouterr().err


def test_serve_replay_serves_cockpits_that_replay_the_file_and_refuses_a_bad_one(monkeypatch, tmp_path, capsys):
    from tui.cli import build_parser
    from tui.cli.record_cmds import cmd_replay
    from tui.serve import server

    served = []

    async def serve_until_stopped(config) -> None:
        served.append(config)

    monkeypatch.setattr(server, "serve_until_stopped", serve_until_stopped)
    assert main(["serve", "--replay", str(KILL_AND_RESUME), "--theme", "light"]) == 0
    (config,) = served
    argv = config.cockpit_argv[3:]  # after python -m tui
    assert argv[:2] == ["replay", str(KILL_AND_RESUME.resolve())]
    parsed = build_parser().parse_args(argv)
    assert parsed.handler is cmd_replay and parsed.theme == "light"

    assert main(["serve", "--replay", str(cut(KILL_AND_RESUME, tmp_path / "cut.kfrec.gz"))]) == 2
    assert "cut short" in capsys.readouterr().err and len(served) == 1


async def test_looping_plays_the_recording_again_from_its_start_as_a_watch_opened_again():
    recording = load(KILL_AND_RESUME)
    clock = VirtualTime()
    replay = ReplayCluster(recording, Playhead(recording.ended, 2.0, loop=True, monotonic=clock.monotonic,
                                               sleep=clock.sleep))
    jobs = [e.value for e in recording.streamed("watch_jobs")]

    async def twice() -> list:
        seen = []
        for _ in range(2):
            with pytest.raises(Unavailable, match="starts again"):
                async for job in replay.watch_jobs():
                    seen.append(job)
        return seen

    played = asyncio.ensure_future(twice())
    await clock.run_until(played)
    assert played.result() == jobs + jobs
    assert clock.now == pytest.approx(2 * recording.ended / 2.0)  # twice through, at 2x
