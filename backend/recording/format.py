"""The recording file: gzip'd JSON lines, a header first (format version, the cluster it came
from, the job, when it started, what was kept), then one entry per item a stream gave or per
read, each at its time since the start, and a footer saying how it ended and what was dropped.

Values are the protocol's own types, written as their pydantic dump (LogLine, a slotted
dataclass, as a list): `encode`/`decode` know only the types of backend.models, so a recording
can never name a class to build. A file that is not one, is cut short, or is of a newer format
is a `BadRecording`: one line, the CLI's exit 2.
"""

from __future__ import annotations

import gzip
import json
import zlib
from dataclasses import astuple, dataclass, field
from pathlib import Path
from typing import IO, Any, Iterator

from pydantic import BaseModel

from backend import models
from backend.errors import ClusterError

KIND = "kfcockpit-recording"
FORMAT_VERSION = 1
SUFFIX = ".kfrec.gz"


class BadRecording(ClusterError):
    """Not a recording this version can play (one line)."""


_MODELS: dict[str, type[BaseModel]] = {
    name: value for name in models.__all__
    if isinstance(value := getattr(models, name), type) and issubclass(value, BaseModel)
}


def encode(value: Any) -> Any:
    """A protocol value as JSON: models tagged with their class, LogLines as lists."""
    if isinstance(value, models.LogLine):
        return {"$": "LogLine", "v": list(astuple(value))}
    if isinstance(value, BaseModel):
        return {"$": type(value).__name__, "v": value.model_dump(mode="json")}
    if isinstance(value, dict):
        return {"$": "dict", "v": {str(k): encode(v) for k, v in value.items()}}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    return value


def decode(value: Any) -> Any:
    if isinstance(value, list):
        return [decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    tag, inner = value.get("$"), value.get("v")
    if tag == "LogLine":
        return models.LogLine(*inner)
    if tag == "dict":
        return {k: decode(v) for k, v in inner.items()}
    if tag in _MODELS:
        return _MODELS[tag].model_validate(inner)
    raise BadRecording(f"a value of unknown type {str(tag)[:40]!r}")


@dataclass(frozen=True)
class Entry:
    """One item of a stream (`stream`: the method's name) or one read (`read`: the method's name
    and `args`, its arguments as a key), `at` seconds after the recording started."""

    at: float
    value: Any
    stream: str | None = None
    read: str | None = None
    args: str = ""


@dataclass
class Recording:
    job: str
    cluster: str  # Capabilities.record of the cluster it came from
    started: float  # the wall clock at its start: the times inside the values are absolute
    limits: dict[str, Any]
    entries: list[Entry] = field(default_factory=list)
    ended: float = 0.0  # seconds after the start
    how: str = ""  # "the job ended", "interrupted"
    dropped: dict[str, int] = field(default_factory=dict)
    source: str = ""  # the file it was read from

    def streamed(self, stream: str) -> Iterator[Entry]:
        return (e for e in self.entries if e.stream == stream)


def args_key(**args: Any) -> str:
    """A read's arguments as the key its results are found by (None-valued ones left out)."""
    return json.dumps({k: sorted(v) if isinstance(v, (set, frozenset, tuple)) else v
                       for k, v in sorted(args.items()) if v is not None}, sort_keys=True)


class Writer:
    """Appends entries to a recording file as they come (an interrupted recorder keeps what it
    had), and closes it with the footer."""

    def __init__(self, path: Path, job: str, cluster: str, started: float, limits: dict[str, Any]) -> None:
        self.path = path
        self._file: IO[str] = gzip.open(path, "wt", encoding="utf-8")
        self._put({"kind": KIND, "format": FORMAT_VERSION, "job": job, "cluster": cluster,
                   "started": started, "limits": limits})

    def _put(self, obj: dict) -> None:
        self._file.write(json.dumps(obj, separators=(",", ":")) + "\n")

    def stream(self, at: float, stream: str, value: Any) -> None:
        self._put({"t": round(at, 4), "s": stream, "v": encode(value)})

    def read(self, at: float, method: str, args: str, value: Any) -> None:
        self._put({"t": round(at, 4), "r": method, "a": args, "v": encode(value)})

    def close(self, at: float, how: str, dropped: dict[str, int]) -> None:
        self._put({"end": round(at, 4), "how": how, "dropped": dropped})
        self._file.close()


def load(path: Path) -> Recording:
    """The recording in `path`; BadRecording for anything else."""
    name = path.name
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        raise BadRecording(f"{path}: no such file") from None
    except (gzip.BadGzipFile, UnicodeDecodeError):
        raise BadRecording(f"{name}: not a kfcockpit recording (not gzip'd JSON lines)") from None
    except (EOFError, zlib.error):
        raise BadRecording(f"{name}: the recording is cut short (truncated); record it again") from None
    except OSError as exc:
        raise BadRecording(f"{name}: cannot read it: {exc.strerror or exc}") from None
    try:
        rows = [json.loads(line) for line in lines]
    except ValueError:
        raise BadRecording(f"{name}: the recording is damaged (a line is not JSON)") from None
    header = rows[0] if rows and isinstance(rows[0], dict) else {}
    if header.get("kind") != KIND:
        raise BadRecording(f"{name}: not a kfcockpit recording (no recording header)")
    version = header.get("format")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise BadRecording(f"{name}: a recording of format {version}, newer than this kfcockpit's "
                           f"({FORMAT_VERSION}): upgrade kfcockpit to replay it")
    footer = rows[-1] if len(rows) > 1 and isinstance(rows[-1], dict) and "end" in rows[-1] else None
    if footer is None:
        raise BadRecording(f"{name}: the recording is cut short (no end); record it again")
    try:
        recording = Recording(job=str(header["job"]), cluster=str(header["cluster"]),
                              started=float(header["started"]), limits=dict(header.get("limits") or {}),
                              ended=float(footer["end"]), how=str(footer.get("how", "")),
                              dropped=dict(footer.get("dropped") or {}), source=str(path))
        for row in rows[1:-1]:
            recording.entries.append(Entry(at=float(row["t"]), value=decode(row["v"]), stream=row.get("s"),
                                           read=row.get("r"), args=row.get("a", "")))
    except (KeyError, TypeError, ValueError) as exc:
        raise BadRecording(f"{name}: the recording is damaged ({type(exc).__name__}: {str(exc)[:80]})") from None
    recording.entries.sort(key=lambda e: e.at)  # stable: each stream's own order is kept
    return recording
