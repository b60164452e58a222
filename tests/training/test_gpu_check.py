"""bench/gpu_check.py's CPU half, as CI runs it on a machine without a GPU: with torch alone (as on
a GPU machine that installs nothing), one line saying there is no GPU, every check passing, exit 0.
Its GPU half runs where a GPU is; see README ("Training on GPUs")."""

from __future__ import annotations

import subprocess
import sys

from tests.training.conftest import REPO, torch_alone


def test_the_gpu_check_runs_its_cpu_half_and_says_no_gpu_was_found(tmp_path):
    env = dict(torch_alone(tmp_path / "site"), CUDA_VISIBLE_DEVICES="")
    done = subprocess.run([sys.executable, str(REPO / "bench" / "gpu_check.py")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "gpu_check: no NVIDIA GPU here (torch.cuda.is_available() is False): the CPU half only"
    rows = [line.split() for line in lines[2:-1]]
    assert [" ".join(row[:row.index("cpu")]) for row in rows] == ["one rank", "two ranks", "kill rank 1, relaunch"]
    assert all(row[row.index("cpu") + 3] == "ok" for row in rows)
    assert lines[-2].endswith("bitwise equal")
    assert lines[-1].startswith("gpu_check: 3 of 3 checks passed in ")


def test_the_readme_says_the_embedded_cluster_runs_the_gpu_job():
    """README's "Training on GPUs" says one thing: the embedded cluster simulates GPUs
    (`cluster up --gpus-per-node`, backend/local/node/devices.py), so trainjob-gpu.yaml runs there."""
    text = (REPO / "README.md").read_text()
    section = text.split("## Training on GPUs", 1)[1].split("\n## ", 1)[0]
    assert "cannot run it" not in section and "have no GPUs" not in section
    assert section.count("--gpus-per-node") >= 2
