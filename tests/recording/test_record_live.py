"""`kfcockpit record` on a live job of the embedded cluster, a worker killed mid-run, then the
replay: at its end it measures what `kfcockpit goodput` measures on the live job (the same
goodput, the same restarts), because it answers the protocol's reads as the live cluster did."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from backend.goodput.job import measure_job
from backend.models import JobPhase
from backend.recording.format import load
from backend.recording.playhead import Playhead
from backend.recording.recorder import Recorder
from backend.recording.replay import ReplayCluster
from tests.local.conftest import REPO, WAIT, apply_all, cli, lesson_job, lesson_resources


async def test_the_replay_of_a_recorded_job_measures_what_kfcockpit_goodput_measures_live(home, cluster, tmp_path):
    await apply_all(cluster, *lesson_resources(), lesson_job("rec", steps=24, step_delay=0.05))
    path = tmp_path / "rec.kfrec.gz"
    recording = asyncio.ensure_future(Recorder(cluster, "rec", path, sample_seconds=0.5).run())
    killed = False
    async for batch in cluster.stream_logs("rec"):
        if not killed and any(line.step is not None and line.step >= 8 for line in batch):
            await cluster.kill_pod(next(p for p in await cluster.list_pods("rec") if p.rank == 1).name)
            killed = True
    job = await cluster.wait_job("rec", frozenset({JobPhase.COMPLETE}), WAIT)
    recorded = await asyncio.wait_for(recording, WAIT)
    assert killed and job.restart_attempt == 1 and recorded.how == "the job ended" and not recorded.dropped

    live = cli(home, "goodput", "rec", "-o", "json")
    assert live.returncode == 0, live.stderr
    shown = json.loads(live.stdout)

    replayed = load(path)
    replay = ReplayCluster(replayed, Playhead(replayed.ended, position=replayed.ended))
    measured = await measure_job(replay, "rec")
    assert measured.summary.restart_attempt == shown["restarts_used"] == 1
    assert measured.goodput.restarts == shown["restarts"] == 1
    assert measured.goodput.goodput == shown["goodput"] and measured.goodput.total == shown["total"]

    unknown = cli(home, "record", "no-such-job", "-o", str(tmp_path / "none.kfrec.gz"))
    said = unknown.stderr
    assert unknown.returncode == 2 and said.count("\n") == 1 and "no-such-job" in said, said
    assert not (tmp_path / "none.kfrec.gz").exists()

    # ctrl+c: the recording so far, closed as a whole file, and what it kept said in one line
    await cluster.apply(lesson_job("long", steps=2000, step_delay=0.2, ckpt_dir="/checkpoints/long"))
    stopped = tmp_path / "long.kfrec.gz"
    env = dict(os.environ, KFCOCKPIT_HOME=str(home), PYTHONPATH=str(REPO))
    record = subprocess.Popen([str(Path(sys.executable).parent / "kfcockpit"), "record", "long", "-o", str(stopped)],
                              cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    began = await asyncio.to_thread(record.stderr.readline)  # said once its ctrl+c handler is in place
    assert began.startswith("recording long until it ends"), began
    record.send_signal(signal.SIGINT)
    out, err = await asyncio.to_thread(record.communicate, timeout=WAIT)
    assert record.returncode == 0 and err == "", err
    assert out.startswith("recorded long: ") and out.rstrip().endswith("(stopped)"), out
    assert load(stopped).how == "stopped"
