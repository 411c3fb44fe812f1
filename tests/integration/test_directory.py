"""The directory (``gateway.caches.directory``): a refresh is one round trip, parses nothing
when the queue's settings did not change, and sees a change made behind its back (another
gateway) at the next refresh."""

from __future__ import annotations

import asyncio

from gateway.caches.directory import Directory
from gateway.store.endpoint_records import EndpointRecord
from sdk.wire import QueuePolicy

from .conftest import Stores


def endpoint(s: Stores, n: int) -> EndpointRecord:
    return EndpointRecord(
        id=f"ep{n}",
        queue="q",
        url=f"http://127.0.0.1:{n + 1}/",
        concurrency=4,
        capabilities=[],
        secrets=["whsec_x"],
        created_ms=s.clock.now_ms() - n,  # the later ones older
    )


async def refreshed(directory: Directory) -> None:
    """Wait for the refresh a view of an old entry started (none other runs)."""
    await asyncio.gather(*directory._reads)


async def test_a_refresh_parses_only_what_changed(stores: Stores) -> None:
    await stores.queues.put("q", QueuePolicy(max_attempts=3), stores.clock.now_ms())
    for n in range(3):
        await stores.queues.add_endpoint(endpoint(stores, n))
    directory = Directory(stores.queues, ttl=0.0)
    first = await directory.view("q")
    assert first is not None
    assert list(first.endpoints) == ["ep2", "ep1", "ep0"]  # oldest first, as the listing

    assert await directory.view("q") is first  # old: used, and refreshed meanwhile
    await refreshed(directory)
    same = directory.peek("q")
    assert same is not None
    assert same is not first
    assert same.policy is first.policy  # not parsed again
    assert same.endpoints is first.endpoints

    await stores.queues.patch("q", {"max_attempts": 5}, stores.clock.now_ms())  # "elsewhere"
    await directory.view("q")
    await refreshed(directory)
    changed = directory.peek("q")
    assert changed is not None
    assert changed.policy.max_attempts == 5
    await stores.queues.delete_endpoint("q", "ep1")
    await directory.view("q")
    await refreshed(directory)
    changed = directory.peek("q")
    assert changed is not None
    assert list(changed.endpoints) == ["ep2", "ep0"]

    await stores.queues.delete("q", force=True)
    await directory.view("q")
    await refreshed(directory)
    assert directory.peek("q") is None
    assert await directory.view("q") is None
