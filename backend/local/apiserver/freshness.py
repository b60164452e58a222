"""A read from a resourceVersion the store has not reached yet, as kube-apiserver's watch cache
answers it (storage/cacher/watch_cache.go waitUntilFreshAndBlock): wait up to `blockTimeout`
(3 s) for the version, then refuse with storage.NewTooLargeResourceVersionError, a 504 Timeout
"Too large resource version" telling the client to retry after a second. A watch gets that
Status as its one ERROR event (cacher.go: newErrWatcher), a list as the response.
"""

from __future__ import annotations

import asyncio

from backend.local.registry.status import ApiError
from backend.local.registry.store import Store

BLOCK_SECONDS = 3.0  # blockTimeout
RETRY_SECONDS = 1  # resourceVersionTooHighRetrySeconds


def too_large(wanted: int, current: int) -> ApiError:
    return ApiError(504, "Timeout", f"Timeout: Too large resource version: {wanted}, current: {current}",
                    {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                     "retryAfterSeconds": RETRY_SECONDS})


async def until_fresh(store: Store, wanted: int, timeout: float = BLOCK_SECONDS) -> None:
    """Return once the store holds version `wanted`; 504 after `timeout` seconds without it."""
    if store.rv >= wanted:
        return
    moved = asyncio.Event()

    def listener(_kind, _event) -> None:
        moved.set()

    store.listeners.append(listener)
    try:
        async with asyncio.timeout(timeout):
            while store.rv < wanted:
                moved.clear()
                await moved.wait()
    except TimeoutError:
        raise too_large(wanted, store.rv) from None
    finally:
        store.listeners.remove(listener)
