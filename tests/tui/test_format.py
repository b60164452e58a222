from tui import format as fmt
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
