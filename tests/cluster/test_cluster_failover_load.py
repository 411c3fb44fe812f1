"""A primary of a Redis Cluster killed (SIGKILL) under load from many clients through two
gateway processes, on a cluster of its own with a 1 s ``cluster-node-timeout``; its replica
is promoted by itself (about two seconds later).

Six queues, two on each primary; each queue has one producer per gateway, each on one
keep-alive connection of its own, enqueueing without pause. Through the kill, the slot-map
change and the promotion, every answer is 201 or 503 with ``Retry-After`` (no 500: redis-py's
cluster client fails commands of every node, not only the dead one's, with errors that are not
``RedisError`` when it closes its connections to re-read the map); no connection is closed by
a gateway (an exception that escapes the app makes uvicorn close the connection after the
answer, and a producer that has just sent its next request on it loses it without an answer);
afterwards every queue takes enqueues again, and every acknowledged task is held by the
cluster.

An enqueue is acknowledged after its primary ran the script; the primary sends the write to its
replica in the same turn of its event loop and a killed process's socket buffers still reach
the replica, which reads them before it is promoted a second later: on loopback, nothing
acknowledged is lost (what a cluster without ``WAIT`` can lose is docs/deploy.md's).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import httpx
import pytest
from redis.cluster import RedisCluster

from gateway.core.ids import IdMaker
from gateway.serving.redis_cluster import ManagedCluster
from gateway.store.keys import QueueKeys
from tests.cluster.test_cluster_failover import (
    cluster_agrees,
    is_primary,
    own_cluster,  # noqa: F401  (the fixture)
    primary_of,
    replica_caught_up,
    replica_of_queue_primary,
)
from tests.e2e.conftest import ADMIN
from tests.e2e.conftest import Cluster as Processes
from tests.support import until

QUEUES_PER_PRIMARY = 2
# Producers per queue and gateway, half of them choosing their task ids (whose index entries
# are claimed in a round trip of their own): requests in flight on every node when the map
# changes.
PRODUCERS = 4
# Acknowledged enqueues each queue needs before the kill, and after the promotion.
BEFORE, AFTER = 10, 10
# One request's hang guard: the gateway promises which answers it gives, not how fast (one
# may ride redis-py's retries while the slot has no primary, on a loaded machine).
PATIENCE = 30.0


@dataclass
class Producer:
    """One client of one gateway, on one keep-alive connection, enqueueing into ``queue``."""

    gateway: str
    queue: str
    ids: IdMaker | None  # the task ids the producer chooses itself, or None
    acknowledged: list[str] = field(default_factory=list)
    answers: Counter[int] = field(default_factory=Counter)
    unexpected: list[str] = field(default_factory=list)
    # The local address of each connection an answer came on (None: closed right after it).
    connections: set[object] = field(default_factory=set)

    async def run(self, stop: asyncio.Event) -> None:
        async with httpx.AsyncClient(
            base_url=self.gateway,
            headers={"authorization": f"Bearer {ADMIN}"},
            timeout=PATIENCE,
            limits=httpx.Limits(max_connections=1),
        ) as client:
            while not stop.is_set():
                task: dict[str, str] = {"name": "send"}
                if self.ids is not None:
                    task["id"] = self.ids.take(1)[0]
                try:
                    answer = await client.post(f"/v1/queues/{self.queue}/tasks", json=task)
                except httpx.TransportError as e:
                    self.unexpected.append(f"{self.gateway} {self.queue}: no answer: {e!r}")
                    continue
                try:
                    local = answer.extensions["network_stream"].get_extra_info("client_addr")
                except OSError:  # closed already: the gateway closed it after its answer
                    local = None
                self.connections.add(local)
                self.answers[answer.status_code] += 1
                if answer.status_code == 201:
                    self.acknowledged.append(answer.json()["id"])
                elif answer.status_code == 503 and answer.headers.get("retry-after", "").isdigit():
                    await asyncio.sleep(0.02)  # as a client honouring Retry-After would, briefly
                else:
                    self.unexpected.append(
                        f"{self.gateway} {self.queue}: {answer.status_code} "
                        f"{dict(answer.headers)} {answer.text}"
                    )


def queues_on_every_primary(ports: list[int]) -> list[str]:
    """``QUEUES_PER_PRIMARY`` queue names for each primary, by their slots."""
    by_primary: dict[int, list[str]] = {}
    for name in (f"load-{i}" for i in range(1000)):
        on = by_primary.setdefault(primary_of(ports, QueueKeys.of(name).meta), [])
        if len(on) < QUEUES_PER_PRIMARY:
            on.append(name)
        if len(by_primary) == 3 and all(len(q) == QUEUES_PER_PRIMARY for q in by_primary.values()):
            return [name for names in by_primary.values() for name in names]
    raise AssertionError("no queue names for every primary")


@pytest.mark.timeout(240)
async def test_a_killed_primary_under_load_answers_only_201_or_503(
    own_cluster: ManagedCluster,  # noqa: F811
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    ports = own_cluster.ports
    processes = Processes(own_cluster.url, tmp_path)
    logs = [tmp_path / f"gateway{i}.log" for i in range(2)]
    try:
        for log in logs:
            processes.gateway(log=log)
        queues = queues_on_every_primary(ports)
        with processes.api() as api:
            for queue in queues:  # paused: the tasks stay queued, to be counted afterwards
                answer = api.put(f"/v1/queues/{queue}", json={"paused": True})
                assert answer.status_code == 201, answer.text
        old, new = replica_of_queue_primary(ports, queues[0])
        for primary in {primary_of(ports, QueueKeys.of(q).meta) for q in queues}:
            await until(partial(replica_caught_up, primary), what="every replica to catch up")

        producers = [
            Producer(g, q, IdMaker() if i % 2 else None)
            for q in queues
            for g in processes.gateways
            for i in range(PRODUCERS)
        ]
        stop = asyncio.Event()
        running = [asyncio.create_task(p.run(stop)) for p in producers]
        try:
            await until(
                lambda: all(len(p.acknowledged) >= BEFORE for p in producers),
                timeout=60,
                what="enqueues on every queue before the kill",
            )
            process = own_cluster.node(old).process
            assert process is not None
            process.kill()
            killed_at = time.monotonic()
            await until(lambda: is_primary(new), timeout=30, what="the replica's promotion")
            live = [p for p in ports if p != old]
            await until(
                lambda: cluster_agrees(live, new, queues[0]), timeout=30, what="the new map"
            )
            promoted = [len(p.acknowledged) for p in producers]
            await until(
                lambda: all(
                    len(p.acknowledged) >= n + AFTER
                    for p, n in zip(producers, promoted, strict=True)
                ),
                timeout=60,
                what="enqueues on every queue after the promotion",
            )
            back_after = time.monotonic() - killed_at
        finally:
            stop.set()
            await asyncio.gather(*running, return_exceptions=True)
        for task in running:
            assert task.exception() is None, task.exception()
    finally:
        processes.stop()

    answers = sum((p.answers for p in producers), Counter[int]())
    refused = Counter[str]()
    for p in producers:
        refused["killed" if primary_of(live, QueueKeys.of(p.queue).meta) == new else "others"] += (
            p.answers[503]
        )
    print(
        f"cluster under load: answers {dict(answers)} (503s on the killed primary's queues and "
        f"on the others' {dict(refused)}), every queue back after {back_after:.1f}s"
    )
    record_property("answers", dict(answers))
    gateway_logs = "\n".join(log.read_text() for log in logs)
    unexpected = [u for p in producers for u in p.unexpected]
    assert not unexpected, (unexpected[:10], gateway_logs[-5000:])
    closed = [
        f"{p.gateway} {p.queue}"
        for p in producers
        if len(p.connections) != 1 or None in p.connections
    ]
    assert not closed, ("the gateway closed connections", closed, gateway_logs[-5000:])
    assert "Exception in ASGI application" not in gateway_logs, gateway_logs[-5000:]

    with RedisCluster(host="127.0.0.1", port=new, decode_responses=True) as client:
        lost = [
            task_id
            for queue in queues
            for ids in [[i for p in producers if p.queue == queue for i in p.acknowledged]]
            for task_id, stored in zip(
                ids, client.hmget(QueueKeys.of(queue).meta, ids), strict=True
            )
            if stored is None
        ]
    acknowledged = sum(len(p.acknowledged) for p in producers)
    record_property("acknowledged", acknowledged)
    record_property("lost", len(lost))
    assert not lost, f"{len(lost)} of {acknowledged} acknowledged enqueues lost"
