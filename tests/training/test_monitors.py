"""What watches the loop from beside it: the heartbeat of a rank that waits on a stopped peer, the
collective timeout that turns a hang into a failure, and rank 0's progress reports to the
Trainer's status endpoint (kubeflow/trainer v2.3.0 pkg/statusserver; the SDK's
update_trainjob_status is the client this speaks like)."""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from backend.local.apiserver import credentials
from tests.training.conftest import REPO, env, plain_cmd, torchrun_cmd
from training import heartbeat, progress
from training.logfmt import parse_line


# ---------------------------------------------------------------------------- the heartbeat

def test_a_step_that_overruns_says_it_waits_until_it_ends(monkeypatch):
    monkeypatch.setattr(heartbeat, "FLOOR", 0.05)
    monkeypatch.setattr(heartbeat, "EVERY", 0.05)
    said, second = [], threading.Event()

    def emit(**fields):
        said.append(fields)
        if len(said) == 2:
            second.set()

    beat = heartbeat.Heartbeat(emit, rank=1, world=2)
    try:
        beat.begin(7)
        assert second.wait(10)
        beat.end()
        count = len(said)
        beat.begin(8)
        beat.end()  # a step that ends in time says nothing
        beat.stop()
        beat._thread.join(5)
    finally:
        beat.stop()
    assert said[0]["event"] == "waiting" and said[0]["step"] == 7 and said[0]["rank"] == 1
    assert said[1]["seconds"] > said[0]["seconds"]
    assert len(said) == count and not beat._thread.is_alive()


def test_the_limit_is_a_few_usual_steps_and_never_under_the_floor():
    beat = heartbeat.Heartbeat(lambda **_: None, rank=0, world=2)
    try:
        assert beat._limit() == heartbeat.FLOOR
        beat._recent = [1.0, 1.2, 0.8]
        assert beat._limit() == pytest.approx(heartbeat.FIRST_AFTER * 1.0)
    finally:
        beat.stop()


# ---------------------------------------------------------------------------- a hang becomes a failure

def test_a_frozen_rank_is_told_by_its_silence_and_the_collective_timeout_fails_the_step(ckpt_dir):
    """Rank 1 is stopped (SIGSTOP, as a frozen node): rank 0 blocks in the all-reduce, says it
    waits, and fails the step once --collective-timeout passes, saving the step it is at."""
    proc = subprocess.Popen(torchrun_cmd(2, "--steps", "400", "--step-delay", "0.02", "--collective-timeout", "6s",
                                         "--ckpt-dir", str(ckpt_dir), "--ckpt-every", "1000"),
                            cwd=REPO, env=env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            start_new_session=True)
    lines, pids, frozen = [], {}, None
    try:
        for line in proc.stdout:
            lines.append(line)
            fields = parse_line(line)
            if fields.get("event") == "start":
                pids[fields["rank"]] = int(fields["pid"])
            if frozen is None and fields.get("step") == "20" and "rank" in fields and len(pids) == 2:
                os.kill(pids["1"], signal.SIGSTOP)
                frozen = len(lines)
            if fields.get("event") == "checkpoint_saved":
                break
    finally:
        if "1" in pids:
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    os.kill(pids["1"], sig)
                except ProcessLookupError:
                    pass
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    after = [parse_line(line) for line in lines[frozen:]]
    waiting = [f for f in after if f.get("event") == "waiting"]
    assert waiting and {f["rank"] for f in waiting} == {"0"}  # the stopped rank says nothing
    saved = [f for f in after if f.get("event") == "checkpoint_saved"]
    assert saved and saved[0]["reason"] == "peer_failure" and saved[0]["rank"] == "0"
    assert float(waiting[-1]["seconds"]) < 6.5  # the step failed at the timeout, not torch's 30 min


def test_a_collective_timeout_that_is_not_a_duration_is_one_line_and_exit_2():
    done = subprocess.run(plain_cmd("--collective-timeout", "5x"), cwd=REPO, env=env(), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr == ("training.ddp: error: argument --collective-timeout: '5x' is not a duration "
                           "(seconds, or 90s, 5m, 1h)\n")


# ---------------------------------------------------------------------------- progress

class StatusServer:
    """The Trainer's status endpoint as upstream's server.go answers it: POST with the bearer
    token, a JSON body with trainerStatus; 403 without the token, 422 for a body that is not JSON."""

    def __init__(self, directory: Path):
        creds = credentials.load_or_create(directory)
        self.token_file = directory / "sa-token"
        self.token_file.write_text("projected-token\n")
        self.ca = creds.ca_cert
        self.posts: list[dict] = []
        self.refused: list[int] = []
        self.arrived = threading.Condition()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                code = 200
                if self.headers.get("Authorization") != "Bearer projected-token":
                    code = 403
                else:
                    try:
                        payload = json.loads(body)
                    except ValueError:
                        code = 422
                self.send_response(code)
                self.end_headers()
                with server.arrived:
                    if code == 200:
                        server.posts.append(payload)
                    else:
                        server.refused.append(code)
                    server.arrived.notify_all()

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(creds.server_cert, creds.server_key)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"https://127.0.0.1:{self.httpd.server_address[1]}/apis/trainer.kubeflow.org/v1alpha1/" \
                   "namespaces/default/trainjobs/t/status"

    def env(self, token_file: Path | None = None) -> dict[str, str]:
        return {progress.ENV_URL: self.url, progress.ENV_CA: str(self.ca),
                progress.ENV_TOKEN: str(token_file or self.token_file)}

    def wait_posts(self, count: int = 1, until=lambda posts: True) -> list[dict]:
        """The posts once `count` arrived and `until(posts)` holds (the event, not a sleep)."""
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.posts) >= count and until(self.posts), timeout=60)
            return list(self.posts)

    def close(self) -> None:
        self.httpd.shutdown()


@pytest.fixture
def status_server(tmp_path):
    server = StatusServer(tmp_path / "pki")
    yield server
    server.close()


def test_progress_is_sent_at_most_every_few_seconds_and_the_last_on_close(status_server, monkeypatch):
    monkeypatch.setattr(progress, "EVERY", 0.2)
    reporter = progress.ProgressReporter(100, status_server.env())
    for step in range(1, 31):
        reporter.update(step, 0.5, {"loss": "0.5", "step": step})
    first = status_server.wait_posts(1)[0]["trainerStatus"]
    reporter.update(60, 0.5, {"loss": "0.25", "step": 60})
    reporter.close()
    posts = status_server.wait_posts(until=lambda posts: posts[-1]["trainerStatus"]["progressPercentage"] == 60)
    last = posts[-1]["trainerStatus"]
    assert len(posts) <= 3  # 31 updates, sent as the newest of each 0.2 s
    assert first["progressPercentage"] <= last["progressPercentage"] == 60
    assert last["estimatedRemainingSeconds"] == 20  # 40 steps left at 0.5 s
    assert {"name": "loss", "value": "0.25"} in last["metrics"] and last["lastUpdatedTime"]


def test_no_endpoint_no_reports_and_a_wrong_token_changes_nothing(status_server, tmp_path):
    quiet = progress.ProgressReporter(10, {})
    quiet.update(5, 1.0, {})
    quiet.close()
    assert quiet._thread is None
    wrong = tmp_path / "wrong-token"
    wrong.write_text("not-it")
    refused = progress.ProgressReporter(10, status_server.env(wrong))
    refused.update(5, 1.0, {})
    refused.close()
    with status_server.arrived:  # the server counts it after answering: wait for that, not a time
        assert status_server.arrived.wait_for(lambda: status_server.refused, timeout=60)
    assert status_server.refused == [403] and status_server.posts == [] and refused.sent == 0
    assert not progress.post("http://127.0.0.1:1/x", None, str(wrong), {})  # not https: never sent


def test_rank_0_of_a_run_reports_its_progress_to_the_end(status_server, ckpt_dir):
    done = subprocess.run(plain_cmd("--steps", "30", "--step-delay", "0.01"), cwd=REPO,
                          env=env(**status_server.env()), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    last = status_server.wait_posts(until=lambda posts: posts[-1]["trainerStatus"]["progressPercentage"] == 100)[-1]
    last = last["trainerStatus"]
    assert last["progressPercentage"] == 100 and last["estimatedRemainingSeconds"] == 0
    assert {"name": "step", "value": "30"} in last["metrics"]
