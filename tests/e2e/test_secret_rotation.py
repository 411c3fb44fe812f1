"""Rotating an endpoint's signing secret against a real SDK worker process: during the overlap
window pushes carry both signatures, so a worker holding only the previous secret (or only the
new one) accepts them; after it, the previous secret is no longer sent."""

from __future__ import annotations

from pathlib import Path

import pytest
from standardwebhooks import Webhook

from gateway.dispatch.pusher import Pusher
from gateway.store.records import EndpointRecord
from sdk import TaskState
from tests.support import free_port

from .conftest import Cluster

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


def test_pushes_are_signed_with_both_secrets_until_the_window_ends() -> None:
    new, previous = (f"whsec_{'A' * 43}=", f"whsec_{'B' * 43}=")
    record = EndpointRecord(
        id="ep_1",
        queue="q",
        url="http://w",
        concurrency=1,
        capabilities=[],
        secrets=[new, previous],
        previous_until_ms=2_000_000_000_000,
        created_ms=0,
    )
    pusher = Pusher(session=None, callback_base="http://gw")  # type: ignore[arg-type]
    headers = pusher._signed("msg_1", record, '{"a":1}')
    assert len(headers["webhook-signature"].split(" ")) == 2
    for secret in (new, previous):
        Webhook(secret).verify('{"a":1}', headers)  # raises if no signature matches
    ended = record.model_copy(update={"previous_until_ms": 1})
    headers = pusher._signed("msg_2", ended, '{"a":1}')
    assert len(headers["webhook-signature"].split(" ")) == 1
    Webhook(new).verify('{"a":1}', headers)
