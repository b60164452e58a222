"""The torch-free file formats the cockpit reads: logfmt lines and checkpoint sidecars."""

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


def test_inspect_tells_valid_from_truncated_corrupt_and_unfinished(tmp_path):
    meta = {"world_size": 2, "loss": 0.5, "created": 1.0}
    good = fmt.write_checkpoint(tmp_path, dict(meta, step=5), b"x" * 100)
    assert good.name == fmt.file_name(5) and fmt.sidecar_path(good).name == "ckpt-step-000005.json"
    info = fmt.inspect(good)
    assert info.valid and info.step == 5 and info.world_size == 2 and info.loss == 0.5

    truncated = fmt.write_checkpoint(tmp_path, dict(meta, step=6), b"x" * 100)
    truncated.write_bytes(b"x" * 90)
    assert fmt.inspect(truncated).problem == "truncated: 90 of 100 bytes"

    corrupt = fmt.write_checkpoint(tmp_path, dict(meta, step=7), b"x" * 100)
    corrupt.write_bytes(b"x" * 99 + b"y")
    assert fmt.inspect(corrupt).problem == "checksum mismatch"

    unfinished = tmp_path / fmt.file_name(8)  # data renamed into place, sidecar not yet written
    unfinished.write_bytes(b"x" * 100)
    assert fmt.inspect(unfinished).problem == "no metadata sidecar (save not finished)"

    (tmp_path / fmt.temp_name(9, 123)).write_bytes(b"x" * 100)
    assert [p.name for p in fmt.list_files(tmp_path)] == [fmt.file_name(s) for s in (5, 6, 7, 8)]


def test_a_checkpoint_of_format_2_is_checked_by_its_sha256(tmp_path):
    """Format 3 writes a CRC-32 (zlib's, as zip's); a sidecar written before names a sha256."""
    import hashlib
    import zlib

    payload = b"x" * 100
    new = fmt.write_checkpoint(tmp_path, {"step": 1, "world_size": 2}, payload)
    assert fmt.read_meta(new)["crc32"] == f"{zlib.crc32(payload):08x}" and fmt.read_meta(new)["format"] == 3
    old = tmp_path / fmt.file_name(2)
    old.write_bytes(payload)
    fmt.write_sidecar(old, {"step": 2, "world_size": 2, "bytes": 100, "sha256": hashlib.sha256(payload).hexdigest()})
    assert fmt.inspect(old).valid
    old.write_bytes(b"y" * 100)
    assert fmt.inspect(old).problem == "checksum mismatch"


def test_the_fast_crc_is_zlibs_crc32_piece_by_piece():
    """A save sums with zlib-ng where the worker has it, a verify may run where only zlib is: the
    two must agree on every file, whatever pieces torch.save hands over (headers of a few bytes,
    a tensor's storage whole)."""
    import random
    import zlib

    from zlib_ng.zlib_ng import crc32

    assert fmt._crc32 is crc32  # the venv and the images carry it: the fast path is the one tested
    rng = random.Random(7)
    data = rng.randbytes(3 << 20)
    checksum = fmt.Crc32()
    start = 0
    for size in (0, 1, 7, 64, 4096, 1 << 20, len(data)):
        checksum.update(memoryview(data)[start:start + size])
        start = min(len(data), start + size)
    assert start == len(data)
    assert checksum.hexdigest() == f"{zlib.crc32(data):08x}"


def test_one_claim_per_step(tmp_path):
    assert fmt.claim(tmp_path, 17)
    assert not fmt.claim(tmp_path, 17)
    assert fmt.is_leftover(fmt.claim_name(17)) and fmt.is_leftover(fmt.temp_name(17, "5-0a1b2c3d"))
    assert not fmt.is_leftover(fmt.file_name(17))
