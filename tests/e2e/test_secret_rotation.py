"""Rotating an endpoint's signing secret against real worker processes: during the overlap
window pushes carry both signatures, so a worker holding only the previous secret (or only the
new one) accepts them; a push claimed after it (to the millisecond), or after a rotation with no
overlap, carries the new signature alone, whichever gateway pushes it."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from sdk import Client, TaskCreate, TaskState
from tests.support import free_port

from .conftest import Cluster, pushes

pytestmark = pytest.mark.e2e

ECHO = "tests.e2e.worker_app.echo"


def test_a_worker_holding_either_secret_accepts_pushes_during_the_overlap_only(
    cluster: Cluster, tmp_path: Path
) -> None:
    client = cluster.client(cluster.gateway())
    client.put_queue("e2e", max_attempts=1)
    port = free_port()
    endpoint = client.add_endpoint("e2e", f"http://127.0.0.1:{port}/")
    old = endpoint.secret
    cluster.worker(old, port, tmp_path / "pushes.jsonl")  # holds only the first secret

    rotated = client.rotate_secret("e2e", endpoint.id, overlap=600)
    assert rotated.secret != old
    assert rotated.previous_secret_until is not None
    listed = client.list_endpoints("e2e")[0]
    assert listed.previous_secret_until == rotated.previous_secret_until
    first = client.enqueue("e2e", ECHO, {"args": [1]})
    assert client.wait(first.id, timeout=20).state is TaskState.SUCCEEDED

    # A second rotation with no overlap: the first secret is no longer sent at all.
    client.rotate_secret("e2e", endpoint.id, overlap=0)
    assert client.list_endpoints("e2e")[0].previous_secret_until is None
    refused = client.wait(client.enqueue("e2e", ECHO, {"args": [2]}).id, timeout=20)
    assert refused.state is TaskState.DEAD
    assert refused.attempts[-1].http_status == 401  # the worker's answer to a bad signature


LEASE = 30.0  # a push's claim time is its lease_expires_at less this


def recording_endpoint(cluster: Cluster, log: Path) -> tuple[list[Client], str, str]:
    """Two gateways (each dispatches), the queue ``e2e`` and an endpoint whose worker records
    every push's signature (signature_app); returns a client of each, the endpoint id and its
    first secret. A few pushes go first, so both gateways hold the endpoint in their caches."""
    clients = [cluster.client(cluster.gateway()), cluster.client(cluster.gateway())]
    clients[0].put_queue("e2e", lease_timeout=LEASE)
    port = free_port()
    endpoint = clients[0].add_endpoint("e2e", f"http://127.0.0.1:{port}/", concurrency=64)
    cluster.worker("", port, log, app="tests.e2e.signature_app:app")
    for client in clients * 3:
        assert client.wait(client.enqueue("e2e", ECHO).id, timeout=20).state is TaskState.SUCCEEDED
    return clients, endpoint.id, endpoint.secret


def verifies(secret: str, push: dict[str, Any]) -> bool:
    try:
        Webhook(secret).verify(push["body"], push["headers"])
    except WebhookVerificationError:
        return False
    return True


def claimed_ms(push: dict[str, Any]) -> int:
    """When the push was claimed, by the gateways' clock (Redis time): its lease's start."""
    expires = datetime.fromisoformat(json.loads(push["body"])["lease_expires_at"])
    return round(expires.timestamp() * 1000 - LEASE * 1000)


def pushes_of(log: Path, tasks: list[str]) -> list[dict[str, Any]]:
    wanted = set(tasks)
    return [p for p in pushes(log) if p["headers"]["webhook-id"] in wanted]


def enqueue_for(clients: list[Client], seconds: float) -> list[str]:
    """Enqueue a task every 50 ms for ``seconds``, through each gateway in turn; wait for all."""
    ids, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        client = clients[len(ids) % len(clients)]
        ids.append(client.enqueue_batch("e2e", [TaskCreate(name=ECHO)])[0].id)
        time.sleep(0.05)
    for task_id in ids:
        assert clients[0].wait(task_id, timeout=30).state is TaskState.SUCCEEDED
    return ids


def test_no_push_claimed_after_a_rotation_without_overlap_carries_the_old_signature(
    cluster: Cluster, tmp_path: Path
) -> None:
    log = tmp_path / "pushes.jsonl"
    clients, endpoint_id, old = recording_endpoint(cluster, log)
    rotated = clients[0].rotate_secret("e2e", endpoint_id, overlap=0)  # after a leak
    assert rotated.previous_secret_until is None
    # Every task below is enqueued after the rotation's answer, so claimed after it.
    after = pushes_of(log, enqueue_for(clients, 1.5))
    assert after
    leaked = [claimed_ms(p) for p in after if verifies(old, p)]
    assert leaked == [], f"{len(leaked)} of {len(after)} pushes still carry the old signature"
    assert all(verifies(rotated.secret, p) for p in after)


def test_the_old_signature_stops_at_the_overlaps_millisecond(
    cluster: Cluster, tmp_path: Path
) -> None:
    log = tmp_path / "pushes.jsonl"
    clients, endpoint_id, old = recording_endpoint(cluster, log)
    rotated = clients[0].rotate_secret("e2e", endpoint_id, overlap=2.0)
    assert rotated.previous_secret_until is not None
    end_ms = round(rotated.previous_secret_until.timestamp() * 1000)
    # Pushes from just after the rotation to well past the end of the overlap.
    left = end_ms / 1000 - time.time()
    seen = pushes_of(log, enqueue_for(clients, left + 1.0))
    during = [p for p in seen if claimed_ms(p) < end_ms]
    after = [p for p in seen if claimed_ms(p) >= end_ms]
    assert min(len(during), len(after)) > 0, (len(during), len(after))
    assert all(verifies(old, p) and verifies(rotated.secret, p) for p in during)
    late = [claimed_ms(p) - end_ms for p in after if verifies(old, p)]
    assert late == [], f"claimed this many ms after the overlap, still signed with the old: {late}"
    assert all(verifies(rotated.secret, p) for p in after)
