"""The scheduler alone: quantities as Kubernetes writes them, binding while requests fit,
first come first served, and release binding whoever fits next."""

from __future__ import annotations

import asyncio

import pytest

from backend.local.scheduler import Requests, Scheduler
from backend.quantity import quantity


@pytest.mark.parametrize("text, value", [("1", 1), ("500m", 0.5), ("2Gi", 2 * 2**30), ("1G", 1e9),
                                         ("1.5", 1.5), ("1e3", 1000), (None, 0), (2, 2),
                                         ("1500000n", 0.0015), ("250u", 0.00025)])  # metrics-server's CPU
def test_quantities(text, value):
    assert quantity(text) == value


def test_bad_quantity():
    with pytest.raises(ValueError):
        quantity("one cpu")


async def test_binding_waits_for_capacity_in_order():
    told = []
    scheduler = Scheduler(cpu=2, memory=4 * 2**30, pods=3, unschedulable=lambda pod, why: told.append((pod, why)))
    await scheduler.bind("a", Requests.of({"cpu": "1"}))
    await scheduler.bind("b", Requests.of({"cpu": "1", "memory": "1Gi"}))
    c = asyncio.ensure_future(scheduler.bind("c", Requests.of({"cpu": "1"})))
    d = asyncio.ensure_future(scheduler.bind("d", Requests()))  # fits, but may not overtake c
    await asyncio.sleep(0)
    assert not c.done() and not d.done()
    assert told[0] == ("c", "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: "
                            "1 No preemption victims found for incoming pod.")
    scheduler.release("a")
    await asyncio.wait_for(asyncio.gather(c, d), 5)
    assert set(scheduler.bound) == {"b", "c", "d"}
    e = asyncio.ensure_future(scheduler.bind("e", Requests()))
    await asyncio.sleep(0)
    assert "Too many pods" in told[-1][1]
    e.cancel()
    with pytest.raises(asyncio.CancelledError):
        await e
    assert not scheduler.is_waiting("e")
