"""Events on a real Redis Cluster (three primaries): one event whose triggers' queues sit on
different primaries starts one task in each (no script spans them: each enqueue is its own
queue's, and the ids are derived); an event left pending by a stopped gateway is finished by
the upkeep; the retention sweep's commands reach keys on every primary."""

from __future__ import annotations

import time

from redis.cluster import RedisCluster

from gateway.core.ids import derived_id
from gateway.services.events import EventService
from gateway.store.clock import ManualClock
from gateway.store.connection import connect
from gateway.store.events import EventStore, StoredEvent
from gateway.store.scripts import Scripts
from tests.scripted_worker import ADMIN
from tests.support import live_gateway, until

from .test_cluster_flows import LEFT, RIGHT, primary_of

DAY_MS = 86_400_000


async def test_an_event_starts_a_task_in_queues_on_different_primaries(
    cluster_url: str, redis_cluster: list[int]
) -> None:
    with RedisCluster(host="127.0.0.1", port=redis_cluster[0]) as client:
        assert primary_of(client, LEFT) != primary_of(client, RIGHT)
    async with live_gateway(cluster_url, ADMIN, rescan_interval=1) as (_, api):
        for queue in (LEFT, RIGHT):
            assert (await api.put(f"/v1/queues/{queue}", json={})).status_code == 201
            body = {"event": "order.paid", "queue": queue, "task": "ship"}
            assert (await api.put(f"/v1/triggers/to-{queue}", json=body)).status_code == 201
        r = await api.post("/v1/events", json={"name": "order.paid", "id": "o-1"})
        assert r.status_code == 201, r.text
        event = r.json()
        made = {t["queue"]: t["id"] for t in event["started"]}
        ms = event["accepted_ms"]
        assert made == {q: derived_id(ms, "o-1", f"to-{q}") for q in (LEFT, RIGHT)}
        for queue, task_id in made.items():
            task = (await api.get(f"/v1/tasks/{task_id}")).json()
            assert (task["queue"], task["state"]) == (queue, "queued")
        again = await api.post("/v1/events", json={"name": "order.paid", "id": "o-1"})
        assert again.status_code == 200
        assert again.json() == event
        for queue in (LEFT, RIGHT):
            counts = (await api.get(f"/v1/queues/{queue}")).json()["counts"]
            assert sum(counts.values()) == 1

        # A gateway stopped after writing an event's record: the upkeep (every second) of the
        # live gateway finishes it, with the tasks' derived ids.
        redis = await connect(cluster_url, 5.0, 0.0)
        try:
            store = EventStore(redis, Scripts(redis))
            now = int(time.time() * 1000)
            await store.hold("o-2", now - 1)
            await store.create(StoredEvent("o-2", "order.paid", {"n": 2}, now))

            async def finished() -> bool:
                found = await store.get("o-2")
                return found is not None and found.done

            await until(finished, timeout=30, what="the pending event finished")
            event = (await api.get("/v1/events/o-2")).json()
            made = {t["queue"]: t["id"] for t in event["started"]}
            assert made == {q: derived_id(now, "o-2", f"to-{q}") for q in (LEFT, RIGHT)}

            # The sweep, past the retention: every key of both events goes.
            await Scripts(redis).load()
            events = EventService(store, [], ManualClock(), retention_ms=DAY_MS)
            assert await events.sweep(now + 2 * DAY_MS) == 2
            for key in ("jg:ev:o-1", "jg:ev:o-2", "jg:events", "jg:events:n:order.paid"):
                assert not await redis.exists(key), key
        finally:
            await redis.aclose()
