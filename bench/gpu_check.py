"""The training core on this machine's GPUs, proven in one command and at most five minutes.

    python3 bench/gpu_check.py

It needs torch alone: the standard library, torch, this repository's training/ and the goodput
model (backend.goodput, standard library only), run from the checkout; it installs nothing.
Every run is the real `torchrun ... -m training.ddp` command line (training.launch), in processes.

The CPU half (always; tiny model, gloo): one rank; two ranks print the same loss each step; rank 1
SIGKILLed mid-run and the group relaunched ends bitwise equal to the run without a kill.

The GPU half (with NVIDIA GPUs):
  one rank on NCCL;
  two ranks on the GPUs there are: with two or more, NCCL, one GPU each; with one, both on it
    over gloo with CUDA tensors (NCCL refuses two ranks on one device);
  the kill and relaunch on those two ranks, bitwise equal to the run without; the checkpoint it
    wrote opens with plain torch.load where no GPU is visible, and a CPU group resumes from it;
  the 1gb preset's step time on one GPU (fp32 and bf16 autocast) against the same preset on the
    CPU (all cores), measured in this run;
  goodput (backend.goodput) at the 1gb preset on the two ranks with rank 1 killed twice, each
    time relaunched as a platform would: short steps show what the recovery path costs.

It prints a table and exits 1 if a check failed. On a machine without a GPU it says so in one line
and exits 0 once the CPU half passed (CI runs it: tests/training/test_gpu_check.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from backend.goodput import Goodput  # noqa: E402  (standard library only, as this script needs)
from training.launch import ddp_command, with_python  # noqa: E402
from training.logfmt import parse_line  # noqa: E402

LAUNCH_TIMEOUT = 240.0  # one torchrun, start to exit
AFTER_KILL_TIMEOUT = 90.0  # torchrun tears the group down within its 30 s grace
TINY = ["--steps", "20", "--ckpt-every", "5"]
# Opened in a process that sees no GPU, with torch's API only (-I: not even this repository).
PLAIN_LOAD = ("import sys, torch; s = torch.load(sys.argv[1], weights_only=True); "
              "t = [v for v in s['model'].values()]; assert all(v.device.type == 'cpu' for v in t); "
              "print(s['step'], s['device'])")


@dataclass
class Launch:
    """One torchrun: its exit code, every line with the time it arrived, and its stderr's end."""

    code: int
    lines: list[tuple[float, str]]
    error: str
    kills: list[float] = field(default_factory=list)

    def records(self) -> list[dict[str, str]]:
        return [parse_line(text) for _, text in self.lines if "=" in text]

    def events(self, name: str) -> list[dict[str, str]]:
        return [r for r in self.records() if r.get("event") == name]

    def losses(self) -> dict[int, set[str]]:
        by_step: dict[int, set[str]] = {}
        for r in self.records():
            if "loss" in r and "step" in r and "event" not in r:
                by_step.setdefault(int(r["step"]), set()).add(r["loss"])
        return by_step

    def seconds_per_step(self) -> float:
        (done,) = [e for e in self.events("done") if e["rank"] == "0"]
        return 1.0 / float(done["steps_per_sec"])


def launch(nproc: int, args: list[str], kill_at: int | None = None, **env: str) -> Launch:
    """`torchrun --standalone --nproc-per-node NPROC -m training.ddp ARGS`; with `kill_at`, rank 1
    is SIGKILLed once a step line of that step is printed."""
    command = with_python(ddp_command("--standalone", f"--nproc-per-node={nproc}", args=args), sys.executable)
    child_env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", **env,
                     PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    with tempfile.TemporaryFile("w+") as stderr:
        proc = subprocess.Popen(command, cwd=REPO, env=child_env, stdout=subprocess.PIPE, stderr=stderr,
                                text=True, start_new_session=True)
        result = Launch(0, [], "")
        victim = None
        deadline = time.monotonic() + LAUNCH_TIMEOUT
        for text in proc.stdout:
            now = time.time()
            result.lines.append((now, text.rstrip("\n")))
            fields = parse_line(text) if "=" in text else {}
            if fields.get("event") == "start" and fields.get("rank") == "1":
                victim = int(fields["pid"])
            if kill_at is not None and victim and fields.get("step") == str(kill_at) and "event" not in fields:
                os.kill(victim, signal.SIGKILL)
                result.kills.append(now)
                victim, deadline = None, time.monotonic() + AFTER_KILL_TIMEOUT
            if time.monotonic() > deadline:
                break
        try:
            result.code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            result.code = proc.wait()
        stderr.seek(0)
        result.error = next((line for line in reversed(stderr.read().splitlines()) if line.strip()), "")
    return result


@dataclass
class Row:
    check: str
    device: str
    ranks: int
    backend: str
    ok: bool
    figure: str


def _metrics(ckpt_dir: Path) -> dict:
    return json.loads((ckpt_dir / "metrics.json").read_text())


def _failure(run: Launch) -> str:
    return f"exit {run.code}: {run.error[:100]}"


def one_rank(device: str, backend: str) -> Row:
    run = launch(1, [*TINY, "--device", device])
    starts = run.events("start")
    ok = run.code == 0 and len(run.losses()) == 20 and starts and starts[0]["backend"] == backend
    return Row("one rank", device, 1, backend, bool(ok), f"{run.seconds_per_step() * 1e3:.1f} ms/step" if ok
               else _failure(run))


def two_ranks(device: str, backend: str, ckpt_dir: Path) -> Row:
    run = launch(2, [*TINY, "--device", device, "--backend", backend, "--ckpt-dir", str(ckpt_dir)])
    same = run.losses() and all(len(losses) == 1 for losses in run.losses().values())
    ok = run.code == 0 and len(run.losses()) == 20 and same
    figure = "same loss on both ranks, 20 steps" if ok else (_failure(run) if run.code else "ranks' losses differ")
    return Row("two ranks", device, 2, backend, bool(ok), figure)


def kill_and_resume(device: str, backend: str, straight: Path, ckpt_dir: Path) -> Row:
    """Rank 1 SIGKILLed after step 12, the group relaunched: bitwise equal to `straight`'s run."""
    args = [*TINY, "--device", device, "--backend", backend, "--ckpt-dir", str(ckpt_dir), "--step-delay", "0.05"]
    killed = launch(2, args, kill_at=12)
    again = launch(2, args)
    resumed = {e["from_step"] for e in again.events("resumed")}
    saved = [e for e in killed.events("checkpoint_saved") if e["reason"] != "periodic"]
    if again.code != 0 or len(resumed) != 1 or not killed.kills:
        return Row("kill rank 1, relaunch", device, 2, backend, False, _failure(again))
    a, b = _metrics(straight), _metrics(ckpt_dir)
    equal = a["params_sha256"] == b["params_sha256"] and a["loss_history"] == b["loss_history"]
    how = "a survivor's save" if saved else "the last periodic save"
    return Row("kill rank 1, relaunch", device, 2, backend, equal,
               f"resumed from step {resumed.pop()} ({how}); {'bitwise equal' if equal else 'DIFFERS'}")


def plain_load_without_gpu(ckpt_dir: Path) -> Row:
    newest = sorted(ckpt_dir.glob("ckpt-step-*.pt"))[-1]
    done = subprocess.run([sys.executable, "-I", "-c", PLAIN_LOAD, str(newest)], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
    step, _, writer = done.stdout.strip().partition(" ")
    if done.returncode != 0:
        return Row("checkpoint opens without a GPU", "cpu", 1, "-", False,
                   (done.stderr.strip().splitlines() or ["no output"])[-1][:100])
    return Row("checkpoint opens without a GPU", "cpu", 1, "-", writer.startswith("cuda"),
               f"torch.load(weights_only=True): step {step}, written on {writer}")


def resume_on_cpu(gpu_dir: Path, cpu_dir: Path) -> Row:
    """A copy of the GPU group's checkpoints, minus the last, resumed by a CPU group of two."""
    cpu_dir.mkdir()
    for path in sorted(gpu_dir.glob("ckpt-step-*"))[:-2]:  # every step but the last (.json, .pt)
        (cpu_dir / path.name).write_bytes(path.read_bytes())
    run = launch(2, [*TINY, "--device", "cpu", "--ckpt-dir", str(cpu_dir)])
    resumed = [e["from_step"] for e in run.events("resumed")]
    ok = run.code == 0 and len(resumed) == 2 and len(set(resumed)) == 1
    return Row("GPU checkpoint resumes on CPU", "cpu", 2, "gloo", ok,
               f"resumed from step {resumed[0]}, finished" if ok else _failure(run))


def step_times(gpu: str) -> list[Row]:
    """The 1gb preset, one rank: GPU fp32 and bf16 against the CPU with all its cores."""
    rows, seconds = [], {}
    cores = str(os.cpu_count() or 1)
    for name, device, steps, extra in (("gpu fp32", gpu, 30, []), ("gpu bf16", gpu, 30, ["--precision", "bf16"]),
                                       ("cpu fp32", "cpu", 4, ["--threads", cores])):
        run = launch(1, ["--model-size", "1gb", "--steps", str(steps), "--samples", "640", "--device", device, *extra])
        if run.code != 0:
            rows.append(Row(f"1gb step time, {name}", device, 1, "-", False, _failure(run)))
            continue
        seconds[name] = run.seconds_per_step()
        rows.append(Row(f"1gb step time, {name}", device, 1, "-", True, f"{seconds[name] * 1e3:.1f} ms/step"))
    if "cpu fp32" in seconds:
        for name in ("gpu fp32", "gpu bf16"):
            if name in seconds:
                rows.append(Row(f"1gb speed-up, {name} over cpu ({cores} threads)", gpu, 1, "-", True,
                                f"{seconds['cpu fp32'] / seconds[name]:.1f}x"))
    return rows


def goodput_with_kills(device: str, backend: str, ckpt_dir: Path, steps: int = 60,
                       kills: tuple[int, ...] = (20, 40)) -> Row:
    """The 1gb preset on two ranks, rank 1 killed at each of `kills`, relaunched after each."""
    args = ["--model-size", "1gb", "--samples", "640", "--steps", str(steps), "--ckpt-every", "10",
            "--device", device, "--backend", backend, "--ckpt-dir", str(ckpt_dir)]
    model = Goodput(started=time.time())
    runs = []
    for kill_at in (*kills, None):
        run = launch(2, args, kill_at=kill_at)
        runs.append(run)
        for at, text in run.lines:
            model.feed(at, text)
        for at in run.kills:
            model.failure(at)
        if kill_at is None or not run.kills:
            break
    report = model.report()
    ok = runs[-1].code == 0 and report.restarts == len(kills)
    return Row(f"goodput, 1gb, {len(kills)} kills", device, 2, backend, ok,
               report.one_line() if ok else _failure(runs[-1]))


def print_table(rows: list[Row]) -> None:
    header = ("check", "device", "ranks", "backend", "result", "figure")
    table = [header] + [(r.check, r.device, str(r.ranks), r.backend, "ok" if r.ok else "FAILED", r.figure)
                        for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header) - 1)]
    for row in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1])


def main() -> int:
    began = time.monotonic()
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if gpus:
        print(f"gpu_check: {gpus} NVIDIA GPU(s): {torch.cuda.get_device_name(0)}; torch {torch.__version__}, "
              f"CUDA {torch.version.cuda}", flush=True)
    else:
        print("gpu_check: no NVIDIA GPU here (torch.cuda.is_available() is False): the CPU half only", flush=True)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        work = Path(tmp)
        rows.append(one_rank("cpu", "gloo"))
        rows.append(two_ranks("cpu", "gloo", work / "cpu-straight"))
        rows.append(kill_and_resume("cpu", "gloo", work / "cpu-straight", work / "cpu-killed"))
        if gpus:
            pair = "nccl" if gpus >= 2 else "gloo"  # NCCL refuses two ranks on one GPU
            rows.append(one_rank("cuda", "nccl"))
            rows.append(two_ranks("cuda", pair, work / "gpu-straight"))
            rows.append(kill_and_resume("cuda", pair, work / "gpu-straight", work / "gpu-killed"))
            rows.append(plain_load_without_gpu(work / "gpu-killed"))
            rows.append(resume_on_cpu(work / "gpu-killed", work / "cpu-from-gpu"))
            rows += step_times("cuda")
            rows.append(goodput_with_kills("cuda", pair, work / "gpu-goodput"))
    print_table(rows)
    print(f"gpu_check: {sum(r.ok for r in rows)} of {len(rows)} checks passed in {time.monotonic() - began:.0f} s")
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
