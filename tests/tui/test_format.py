import time

import pytest

from backend.lesson.evidence import clock
from backend.models import Evidence
from tui.model import format as fmt
from tui.widgets.step_view import evidence_content
from tui.widgets.pods_table import short_name


def test_ages_read_like_kubectl():
    assert [fmt.age(s) for s in (5, 61, 600, 3700, 90000)] == ["5s", "1m1s", "10m", "1h1m", "1d1h"]
    assert fmt.age(None) == "-"


def test_sizes_and_losses():
    assert fmt.size(512) == "512 B"
    assert fmt.size(3 * 1024 * 1024) == "3.0 MiB"
    assert fmt.loss(0.0836501) == "0.083650"
    assert fmt.loss(None) == "-"


def test_pod_names_shorten_to_what_tells_them_apart():
    assert short_name("lesson-ddp-node-0-1-x7k2p", "lesson-ddp") == "1-x7k2p"
    assert short_name("lesson-ddp-weird", "lesson-ddp") == "weird"
    assert short_name("other-pod", "lesson-ddp") == "other-pod"
    # a RayJob's pods: the worker's rank and its random part, as a TrainJob's (the POD column is 7 wide)
    assert short_name("lesson-ray-worker-0-x7k2p", "lesson-ray") == "0-x7k2p"
    assert short_name("lesson-ray-driver-x7k2p", "lesson-ray") == "driver"


def test_a_name_too_long_loses_its_middle_not_its_end():
    uuid = "3f2a9c1e-58b4-4c2e-9d11-7b0e6c5a4f21-ckpt"
    assert fmt.fit(uuid, 20) == "3f2a9c1e-5…4f21-ckpt"
    assert fmt.fit("checkpoints", 11) == "checkpoints"


@pytest.fixture
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


NOW = 1_800_000_000.0  # 2027-01-15 08:00:00 UTC


def test_evidence_moments_read_as_clock_times_never_epoch_seconds(utc):
    assert clock(NOW - 90, NOW) == "07:58:30"
    assert clock(NOW - 86_400, NOW) == "Jan 14 08:00:00"  # another day says which
    assert clock(None, NOW) == "-"
    shown = evidence_content(Evidence(ok=False, checked="c", seen="s", at=NOW - 90), NOW).plain
    assert shown.startswith("✘ not yet at 07:58:30\n") and "1799999" not in shown


def test_cpu_and_memory_read_as_kubectl_top_in_the_cells_the_pods_table_gives_them():
    from tui.model.format import cpu, memory

    assert [cpu(c) for c in (None, 0.0, 0.25, 0.9996, 1.25, 12.5, 128)] == ["-", "0m", "250m", "1.00", "1.25",
                                                                            "12.5", "128"]
    assert [memory(n) for n in (None, 500, 980 * 2**10, 512 * 2**20, 999.6 * 2**20, 1.2 * 2**30, 15 * 2**30)] == [
        "-", "500", "980Ki", "512Mi", "1.0Gi", "1.2Gi", "15Gi"]
    assert max(len(memory(n * 1.01)) for n in (2**k for k in range(40))) <= 5
    assert max(len(cpu(c / 1000)) for c in range(0, 200_000, 7)) <= 4
