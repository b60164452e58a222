"""The core kinds' schemas belong to the API server that serves them (issue 46: no process-wide
state): each server warms its own on its own event loop, so a second server in a process (a
test's, a controller restarted in place) neither waits on a task of a loop that is gone nor
reads another's; and a server keeps one schema per kind it validates (schemas.MODELS), whatever
the cache file holds."""

from __future__ import annotations

import asyncio
import json

from backend.local.apiserver import schemas
from backend.local.apiserver.schemas import CoreSchemas


async def _not_run(argv: list[str]) -> int:
    raise AssertionError(f"the cache file was there: nothing to make ({argv})")


def _warmed() -> CoreSchemas:
    """A server's schemas, warmed and awaited on an event loop of their own (then closed)."""
    async def serve() -> CoreSchemas:
        core = CoreSchemas()
        core.start(_not_run)
        await core.ready()
        return core

    return asyncio.run(serve())


def test_each_server_warms_its_own_on_its_own_loop_and_keeps_only_its_kinds(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cached = {kind: {"title": kind, "type": "object"} for kind in schemas.MODELS}
    cached["NotAKindOfOurs"] = {"title": "stale"}
    schemas.cache_file().parent.mkdir(parents=True)
    schemas.cache_file().write_text(json.dumps(cached))

    first, second = _warmed(), _warmed()  # two event loops, one after the other
    assert first is not second
    assert second.schema("Pod") == {"title": "Pod", "type": "object"}
    assert len(second) == len(schemas.MODELS)  # the stale entry is not kept
    assert second.schema("NotAKindOfOurs") is None


def test_a_server_gone_while_warming_leaves_the_next_server_nothing_to_wait_on(tmp_path, monkeypatch):
    """Before: the one module-level warming task, cancelled with the first loop, was what every
    later server's requests awaited (CancelledError on each write)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    async def never(argv: list[str]) -> int:
        await asyncio.Event().wait()
        return 0

    async def gone_while_warming() -> None:
        CoreSchemas().start(never)  # the loop ends with the child still making them

    asyncio.run(gone_while_warming())
    schemas.cache_file().parent.mkdir(parents=True)
    schemas.cache_file().write_text(json.dumps({kind: {"title": kind} for kind in schemas.MODELS}))
    assert _warmed().schema("Node") == {"title": "Node"}


def test_a_server_never_warmed_reads_the_cache_file_instead_of_making_them(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    schemas.cache_file().parent.mkdir(parents=True)
    schemas.cache_file().write_text(json.dumps({kind: {"title": kind} for kind in schemas.MODELS}))
    monkeypatch.setattr(schemas, "build", lambda: (_ for _ in ()).throw(AssertionError("built")))
    assert CoreSchemas().schema("ConfigMap") == {"title": "ConfigMap"}
