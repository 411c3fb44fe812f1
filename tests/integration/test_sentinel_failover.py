"""Failover through Sentinel with real processes: a primary, two replicas and three Sentinels.

A gateway connected through ``redis+sentinel://`` enqueues without pause into a paused queue
while the primary is killed (SIGKILL: no goodbye to replicas or clients). Sentinel promotes a
replica; the gateway answers 503 meanwhile (never 500), follows the new primary by itself (its
readiness goes 503, then 200; its pub/sub connection subscribes there again). Then the queue is
resumed and a worker receives every acknowledged task that the new primary holds.

With ``wait_replicas=1`` that is every enqueue acknowledged with 201. With ``wait_replicas=0``
the ones the old primary acknowledged but had not yet sent to the replica are lost: the test
records how many (``acknowledged`` and ``lost`` in its JUnit properties, and a printed line
shown by ``pytest -rA``) and asserts nothing of the count but that it is not more.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from redis.asyncio import Redis
from starlette.applications import Starlette
from starlette.routing import Route

from gateway.settings import ApiKey, Settings
from gateway.store import keys
from gateway.store.keys import QueueKeys
from tests.enqueue_load import report, through_failover
from tests.replicated_redis import ReplicatedRedis, replicated_redis
from tests.scripted_worker import Worker
from tests.support import gateway_client, serve, until

ADMIN = "admin-key-0123456789"
# Enqueues acknowledged on the new primary before the test stops the loop.
AFTER_FAILOVER = 20


@pytest.fixture
def group(tmp_path: Path) -> Iterator[ReplicatedRedis]:
    with replicated_redis(tmp_path) as started:
        yield started


# redis-py's asyncio Sentinel client (8.1) loses track of a few of its connections to a
# Sentinel while it looks for the primary during the failover (its pool holds checked-out
# connections weakly; these were opened by Sentinel.discover_master and are not among the
# pool's when the gateway closes it). They are closed when collected, with ResourceWarnings
# (about the socket, its transport, its stream writer or the connection, as collection goes).
# Collected at this test's teardown, after its event loop closed, so the warnings are this
# test's, and ignored, rather than a later test's failure.
@pytest.fixture(autouse=True)
def collect_dropped_connections() -> Iterator[None]:
    yield
    gc.collect()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("wait_replicas", [1, 0], ids=["wait-on", "wait-off"])
async def test_acknowledged_enqueues_through_a_failover(
    group: ReplicatedRedis, wait_replicas: int, record_property: Callable[[str, object], None]
) -> None:
    settings = Settings(
        redis_url=group.url,
        api_keys=[ApiKey(key=ADMIN, scopes=["admin"])],
        allow_private_endpoints=True,
        wait_replicas=wait_replicas,
        wait_timeout=0.5,
    )
    worker = Worker()
    worker_app = Starlette(routes=[Route("/", worker.handle, methods=["POST"])])
    async with serve(worker_app) as worker_url, gateway_client(settings, ADMIN) as api:
        # Paused: the tasks wait in the queue, to be dispatched from the new primary.
        put = await api.put("/v1/queues/mail", json={"paused": True})
        assert put.status_code == 201, put.text
        endpoint = await api.post(
            "/v1/queues/mail/endpoints", json={"url": worker_url + "/", "batch_size": 100}
        )
        assert endpoint.status_code == 201, endpoint.text
        worker.secret = endpoint.json()["secret"]
        old = group.primary.port

        async def fail_over() -> None:
            assert group.primary.process is not None
            group.primary.process.kill()
            await until(
                lambda: asyncio.to_thread(lambda: group.primary_port() != old),
                timeout=20,
                what="Sentinel to promote a replica",
            )

        enqueues, probes = await through_failover(
            api, "mail", fail_over, after=AFTER_FAILOVER, within=25
        )

        assert not enqueues.unexpected, enqueues.unexpected  # only 201 or 503, never a 500
        assert enqueues.refused, "the switch refuses some enqueues (503) while no primary is up"
        assert probes.seen[0] == 200, probes.seen

        async with Redis(port=group.primary_port(), decode_responses=True) as new_primary:
            meta = QueueKeys.of("mail").meta
            stored = await new_primary.hmget(meta, enqueues.acknowledged)  # type: ignore[arg-type]
            lost = [i for i, s in zip(enqueues.acknowledged, stored, strict=True) if s is None]

            async def subscribed() -> bool:
                found = await new_primary.pubsub_numsub(keys.WAKE_CHANNEL)
                return bool(found[0][1] >= 1)

            await until(subscribed, what="the gateway's pub/sub on the new primary")

        report(f"wait_replicas={wait_replicas}", enqueues, lost, record_property)
        if wait_replicas:
            assert not lost, f"{len(lost)} acknowledged enqueues lost: {lost[:5]}"
        assert len(lost) <= len(enqueues.acknowledged)

        # Every acknowledged task the new primary holds is dispatched from it, once resumed.
        survivors = set(enqueues.acknowledged) - set(lost)
        resumed = await api.patch("/v1/queues/mail", json={"paused": False})
        assert resumed.status_code == 200, resumed.text
        await until(
            lambda: survivors <= {push.id for _, push in worker.received},
            what="the worker to receive every acknowledged task",
        )
