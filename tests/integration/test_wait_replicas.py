"""JOBGATE_WAIT_REPLICAS against a real primary and replica: an enqueue is acknowledged only
once the replica confirmed it, and answered 503 (never 500) when it cannot be."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from gateway.serving.redis_server import ManagedRedis
from gateway.settings import ApiKey, Settings
from gateway.store.keys import QueueKeys
from tests.replicated_redis import primary_at, replica_of, wait_until_replicating
from tests.support import gateway_client

ADMIN = "admin-key-0123456789"
TIMEOUT = 0.3  # where a refusal is awaited
PATIENT = 10.0  # where the replica is there: WAIT answers as soon as it confirms


@pytest.fixture
def primary(tmp_path: Path) -> Iterator[ManagedRedis]:
    with primary_at(tmp_path / "primary") as server:
        yield server


@pytest.fixture
def replica(primary: ManagedRedis, tmp_path: Path) -> Iterator[ManagedRedis]:
    with replica_of(primary, tmp_path / "replica") as server:
        wait_until_replicating(server)
        yield server


async def api(
    primary: ManagedRedis, replicas: int, timeout: float = TIMEOUT
) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(
        redis_url=primary.url,
        api_keys=[ApiKey(key=ADMIN, scopes=["admin"])],
        wait_replicas=replicas,
        wait_timeout=timeout,
    )
    async with gateway_client(settings, ADMIN) as client:
        assert (await client.put("/v1/queues/mail", json={})).status_code == 201
        yield client


@pytest.fixture
async def one_replica_asked(primary: ManagedRedis) -> AsyncIterator[httpx.AsyncClient]:
    async for client in api(primary, 1):
        yield client


@pytest.fixture
async def one_replica_patient(primary: ManagedRedis) -> AsyncIterator[httpx.AsyncClient]:
    # A busy machine can hold a replica's confirmation past TIMEOUT.
    async for client in api(primary, 1, PATIENT):
        yield client


def refused(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 503, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["retry-after"] == "1"
    body: dict[str, Any] = response.json()
    assert "may or may not be stored" in body["detail"]
    return body


async def test_acknowledged_once_the_replica_has_it(
    replica: ManagedRedis, one_replica_patient: httpx.AsyncClient
) -> None:
    single = await one_replica_patient.post("/v1/queues/mail/tasks", json={"name": "send"})
    assert single.status_code == 201, single.text
    batch = await one_replica_patient.post(
        "/v1/queues/mail/tasks/batch", json={"tasks": [{"name": "a"}, {"name": "b"}]}
    )
    assert batch.status_code == 201, batch.text
    # Acknowledged means the replica holds it already: read it there, no waiting.
    async with Redis(port=replica.port, decode_responses=True) as on_replica:
        for task_id in [single.json()["id"], *(t["id"] for t in batch.json()["tasks"])]:
            assert await on_replica.hexists(QueueKeys.of("mail").meta, task_id)


async def test_refused_within_the_timeout_when_the_replica_is_gone(
    replica: ManagedRedis, one_replica_asked: httpx.AsyncClient
) -> None:
    assert (await one_replica_asked.post("/v1/queues/mail/tasks", json={})).status_code == 422
    replica.stop()
    started = time.monotonic()
    body = refused(await one_replica_asked.post("/v1/queues/mail/tasks", json={"name": "send"}))
    assert TIMEOUT <= time.monotonic() - started < TIMEOUT + 2
    assert "0 of the 1" in body["detail"]
    refused(
        await one_replica_asked.post("/v1/queues/mail/tasks/batch", json={"tasks": [{"name": "a"}]})
    )


async def test_more_replicas_asked_than_exist(primary: ManagedRedis, replica: ManagedRedis) -> None:
    # Refused after the whole timeout whatever happens; long enough for the one replica there
    # to confirm on a busy machine (0.3 s was not, once).
    async for client in api(primary, 2, timeout=2.0):
        body = refused(await client.post("/v1/queues/mail/tasks", json={"name": "send"}))
        assert "1 of the 2" in body["detail"]


async def test_a_refused_enqueue_retried_with_its_id_is_not_stored_twice(
    primary: ManagedRedis, one_replica_asked: httpx.AsyncClient
) -> None:
    """No replica: the primary stored it but could not confirm. The retry with the same task
    id finds it (409), so the client knows it is stored, once."""
    task = {"name": "send", "id": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}
    refused(await one_replica_asked.post("/v1/queues/mail/tasks", json=task))
    again = await one_replica_asked.post("/v1/queues/mail/tasks", json=task)
    assert again.status_code == 409, again.text
    assert (await one_replica_asked.get(f"/v1/tasks/{task['id']}")).status_code == 200


async def test_a_wait_longer_than_redis_timeout_is_not_cut_short(primary: ManagedRedis) -> None:
    """The socket timeout leaves WAIT its ``wait_timeout`` on top of ``redis_timeout`` (with
    only redis-py's, a WAIT past it failed as "cannot reach its Redis")."""
    settings = Settings(
        redis_url=primary.url,
        api_keys=[ApiKey(key=ADMIN, scopes=["admin"])],
        wait_replicas=1,
        wait_timeout=1.0,
        redis_timeout=0.3,
    )
    async with gateway_client(settings, ADMIN) as client:
        assert (await client.put("/v1/queues/mail", json={})).status_code == 201
        body = refused(await client.post("/v1/queues/mail/tasks", json={"name": "send"}))
        assert "0 of the 1" in body["detail"]


async def _leased_step_url(client: httpx.AsyncClient) -> tuple[str, dict[str, str], str]:
    """A task of ``mail`` leased to a pull endpoint: its step callback path, the lease header
    and the task id."""
    endpoint = await client.post("/v1/queues/mail/endpoints", json={"pull": True})
    assert endpoint.status_code == 201, endpoint.text
    enqueued = await client.post("/v1/queues/mail/tasks", json={"name": "send"})
    assert enqueued.status_code == 201, enqueued.text
    leased = await client.post(
        "/v1/queues/mail/leases", json={"endpoint_id": endpoint.json()["id"], "wait": 0}
    )
    assert leased.status_code == 200, leased.text
    (item,) = leased.json()["tasks"]
    path = "/" + item["callback"].split("://", 1)[1].split("/", 1)[1] + "/step"
    return path, {"jobgate-lease": item["lease"]}, item["id"]


async def test_a_step_is_answered_recorded_once_the_replica_has_it(
    replica: ManagedRedis, one_replica_patient: httpx.AsyncClient
) -> None:
    """A durable step's "recorded" must survive a failover: the attempt goes on against the
    promoted replica (its lease is there), and a step lost with the old primary would leave
    the task to end without it, every step having been answered recorded."""
    path, lease, task_id = await _leased_step_url(one_replica_patient)
    step = await one_replica_patient.post(path, json={"name": "a", "result": 1}, headers=lease)
    assert step.status_code == 200, step.text
    assert step.json()["recorded"] is True
    async with Redis(port=replica.port, decode_responses=True) as on_replica:
        assert await on_replica.hexists(QueueKeys.of("mail").steps, task_id)


async def test_a_step_the_replica_did_not_confirm_is_refused_not_answered_recorded(
    replica: ManagedRedis, primary: ManagedRedis
) -> None:
    async for client in api(primary, 1, PATIENT):
        path, lease, _ = await _leased_step_url(client)
        replica.stop()
        client.timeout = httpx.Timeout(PATIENT + 30)
        body = refused_step(await client.post(path, json={"name": "a", "result": 1}, headers=lease))
        assert "0 of the 1" in body["detail"]


def refused_step(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "1"
    body: dict[str, Any] = response.json()
    assert "the step may or may not be kept" in body["detail"]
    return body
