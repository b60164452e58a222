"""The torch-free file formats the cockpit reads: logfmt lines and checkpoint headers."""

from __future__ import annotations

from training import checkpoint_format as fmt
from training.logfmt import format_line, parse_line, step_and_loss


def test_logfmt_round_trips_quoted_values():
    line = format_line(event="checkpoint_skipped", file="ckpt-step-000010.pt",
                       reason='truncated: 3 of "9" bytes', loss=0.0836501)
    assert line.startswith('event=checkpoint_skipped file=ckpt-step-000010.pt reason="truncated')
    assert "loss=0.083650" in line
    assert parse_line(line)["reason"] == 'truncated: 3 of "9" bytes'


def test_step_and_loss_only_from_step_lines():
    assert step_and_loss("step=12 loss=0.083650 rank=0 world=2") == (12, 0.08365)
    assert step_and_loss("event=resumed from_step=15 rank=0") is None
    assert step_and_loss("some torch warning: step=?? loss=nan-ish") is None


def test_inspect_tells_valid_from_truncated_and_corrupt(tmp_path):
    data = fmt.encode({"step": 5, "world_size": 2, "loss": 0.5, "created": 1.0}, b"x" * 100)
    good = tmp_path / fmt.file_name(5)
    good.write_bytes(data)
    info = fmt.inspect(good)
    assert info.valid and info.step == 5 and info.world_size == 2 and info.loss == 0.5

    truncated = tmp_path / fmt.file_name(6)
    truncated.write_bytes(data[:-10])
    assert fmt.inspect(truncated).problem == "truncated: 90 of 100 payload bytes"

    corrupt = tmp_path / fmt.file_name(7)
    corrupt.write_bytes(data[:-1] + b"y")
    assert fmt.inspect(corrupt).problem == "checksum mismatch"

    garbage = tmp_path / fmt.file_name(8)
    garbage.write_bytes(b"PK\x03\x04 zip, not ours")
    assert not fmt.inspect(garbage).valid

    (tmp_path / fmt.temp_name(9, 123)).write_bytes(data)
    assert [p.name for p in fmt.list_files(tmp_path)] == [fmt.file_name(s) for s in (5, 6, 7, 8)]
