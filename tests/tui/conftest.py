"""Shared by the cockpit tests: a state root per test on the real embedded cluster (its controller
is stopped afterwards, with every pod), and waiting on the screen's `changed` signal instead of
sleeping."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Callable

import pytest

from backend.settings import Settings
from tui.app import CockpitApp
from tui.config import CockpitConfig
from tui.launch import Launch

# A guard against a hang, not a speed assertion: real training jobs run on 2 shared cores.
WAIT_SECONDS = 240.0


@pytest.fixture
async def home(tmp_path: Path):
    root = tmp_path / "home"
    yield root
    from backend.local.embedded import Embedded

    await Embedded(root).down()


def make_app(home: Path, **kwargs) -> CockpitApp:
    return CockpitApp(Launch.of(Settings(home=home), kwargs.pop("config", CockpitConfig())), **kwargs)


async def wait_until(screen, predicate: Callable[[], bool], what: str, timeout: float = WAIT_SECONDS) -> None:
    """Return once `predicate()` holds, re-checking whenever the screen reports a change."""
    if predicate():
        return
    happened = asyncio.Event()

    def check(_: str) -> None:
        if predicate():
            happened.set()

    screen.changed.subscribe(screen, check, immediate=True)
    try:
        await asyncio.wait_for(happened.wait(), timeout)
    except asyncio.TimeoutError:
        pytest.fail(f"gave up waiting for {what} after {timeout:.0f}s")
    finally:
        screen.changed.unsubscribe(screen)


async def connected(screen) -> None:
    await wait_until(screen, lambda: screen.job_bar.connection == "connected" and bool(screen.checklist.steps),
                     "the cockpit to connect to the local cluster")


def pods_of(screen, attempt: int | None = None, phase: str | None = None) -> list:
    return [p for p in screen.pods_table.pods.values()
            if (attempt is None or p.restart_attempt == attempt) and (phase is None or p.phase.value == phase)]
