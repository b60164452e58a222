"""The API server's revision counter (backend/local/registry/revision.py): persisted in reserved
blocks, one durable write per block, never handing out a version at or below an earlier
server's mark, whenever that server stopped."""

from __future__ import annotations

from backend.local.registry import revision as revision_module
from backend.local.registry.revision import Revision


def test_one_durable_write_per_block_not_per_version(tmp_path, monkeypatch):
    writes = []
    real = revision_module.write_atomic
    monkeypatch.setattr(revision_module, "write_atomic",
                        lambda path, data, **kw: (writes.append(data), real(path, data, **kw)))
    counter = Revision(tmp_path / "revision", block=4)
    start = counter.current
    versions = [counter.next() for _ in range(9)]
    assert versions == list(range(start + 1, start + 10))
    # reserved before the first, the fifth and the ninth version went out
    assert writes == [f"{start + 4}\n", f"{start + 8}\n", f"{start + 12}\n"]
    assert (tmp_path / "revision").read_text() == f"{start + 12}\n"


def test_a_crash_after_a_reservation_loses_versions_never_reuses_them(tmp_path):
    crashed = Revision(tmp_path / "revision", block=100)
    handed_out = [crashed.next() for _ in range(5)]  # then the process dies: no close, no flush
    del crashed
    restarted = Revision(tmp_path / "revision", block=100)
    assert restarted.current == handed_out[0] - 1 + 100  # the whole reserved block is skipped
    assert restarted.next() > max(handed_out)


def test_a_version_found_in_storage_moves_the_counter_above_it(tmp_path):
    counter = Revision(tmp_path / "revision", block=10)
    counter.next()
    counter.advance_past(counter.current + 50)  # beyond the reserved block
    mark = counter.current
    assert counter.next() == mark + 1
    assert int((tmp_path / "revision").read_text()) >= mark + 1  # reserved before it went out


def test_an_unreadable_mark_starts_above_the_wall_clock(tmp_path, monkeypatch):
    (tmp_path / "revision").write_text("not a number\n")
    monkeypatch.setattr(revision_module.time, "time", lambda: 1234.5)
    assert Revision(tmp_path / "revision").current == 1_234_500


def test_in_memory_counts_from_one_and_writes_nothing(tmp_path):
    counter = Revision(None, block=2)
    assert [counter.next() for _ in range(5)] == [2, 3, 4, 5, 6]
    assert list(tmp_path.iterdir()) == []
