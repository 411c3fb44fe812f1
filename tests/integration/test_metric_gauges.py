"""The queue gauges' reading: every queue's depth by state, pushes in flight and open circuits,
in one pipeline per collection (a second one only when the set of queues changed)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from gateway.store.gauges import GaugeReading, GaugeStore
from gateway.store.keys import QUEUES, QueueKeys
from gateway.telemetry.gauges import QueueGauges
from sdk.wire import TaskState
from tests.integration.conftest import Stores


class CountingStore(GaugeStore):
    reads: list[list[str]]

    async def read(self, queues: Sequence[str]) -> GaugeReading:
        self.reads.append(list(queues))
        return await super().read(queues)


async def seed(stores: Stores) -> int:
    """Queues a (2 queued, 1 running on ep1 whose circuit is open) and b (empty)."""
    redis = stores.redis
    seconds, micros = await redis.time()
    now = seconds * 1000 + micros // 1000
    a, b = QueueKeys.of("a"), QueueKeys.of("b")
    await redis.sadd(QUEUES, "a", "b")
    await redis.zadd(a.ready, {"x": 0, "y": 0})
    await redis.zadd(a.running, {"z": now})
    await redis.hset(a.inflight, mapping={"ep1": 1, "ep2": 0})
    await redis.hset(a.health, "ep1", json.dumps({"fails": 5, "open_until": now + 60_000}))
    await redis.hset(b.inflight, "ep3", 0)
    return now


async def test_one_reading_has_depths_in_flight_and_open_circuits(stores: Stores) -> None:
    await seed(stores)
    reading = await GaugeStore(stores.redis).read(["a", "b", "gone"])
    assert reading.queues == {"a", "b"}
    assert set(reading.depth) == {"a", "b"}  # 'gone' is not registered: left out
    assert reading.depth["a"][TaskState.QUEUED] == 2
    assert reading.depth["a"][TaskState.RUNNING] == 1
    assert sum(reading.depth["b"].values()) == 0
    assert reading.in_flight == {"a": {"ep1": 1, "ep2": 0}, "b": {"ep3": 0}}
    assert reading.circuit_open == {"a": {"ep1": True, "ep2": False}, "b": {"ep3": False}}


async def test_a_collection_costs_one_read_once_the_queues_are_known(stores: Stores) -> None:
    await seed(stores)
    store = CountingStore(stores.redis)
    store.reads = []
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    now = [100.0]
    QueueGauges(provider.get_meter("test"), store, asyncio.get_running_loop(), clock=lambda: now[0])

    async def collect() -> set[str]:
        # On another thread, as an exporter collects: the callbacks ask the loop for a read.
        data = await asyncio.to_thread(reader.get_metrics_data)
        assert data is not None
        return {m.name for r in data.resource_metrics for s in r.scope_metrics for m in s.metrics}

    assert await collect() == {"queue_depth", "endpoint_in_flight", "endpoint_circuit_open"}
    assert store.reads == [[], ["a", "b"]]  # the queues learnt, then read; three gauges share it
    now[0] += 0.5
    await collect()
    assert store.reads == [[], ["a", "b"]]  # within max_age: the same reading
    now[0] += 10
    await collect()
    assert store.reads == [[], ["a", "b"], ["a", "b"]]  # one pipeline for the three gauges
    provider.shutdown()
