"""The Node.js worker of ``examples/node-worker`` against a live gateway and a real Redis: a
worker written from docs/protocol.md in another language, verifying pushes with the official
``standardwebhooks`` npm package."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from standardwebhooks import Webhook

from sdk import TaskState
from tests.call_service import CallService
from tests.support import free_port

from .conftest import ROOT, Cluster, wait_http

pytestmark = pytest.mark.e2e

EXAMPLE = ROOT / "examples" / "node-worker"


@pytest.fixture(scope="session")
def node() -> str:
    """The node binary, with the example's locked dependencies installed (``npm ci``, which
    ``make test`` also runs)."""
    found = shutil.which("node")
    assert found, "node is missing: `make node` installs it (apt-get, as root)"
    if not (EXAMPLE / "node_modules" / "standardwebhooks").is_dir():
        npm = shutil.which("npm")
        assert npm, "npm is missing: `make node` installs it (apt-get, as root)"
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=EXAMPLE, check=True, timeout=300)
    return found


def start_node(cluster: Cluster, node: str, secret: str, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "JOBGATE_WORKER_SECRET": secret, "PORT": str(port)}
    proc = subprocess.Popen([node, "worker.mjs"], cwd=EXAMPLE, env=env)
    cluster.procs.append(proc)  # stopped (SIGTERM) with the cluster
    wait_http(f"http://127.0.0.1:{port}/", proc)
    return proc


@pytest.fixture
def setup(cluster: Cluster, node: str) -> tuple[Cluster, str, str]:
    """A gateway, the queue ``node`` with the Node worker's endpoint, and the worker running."""
    gateway = cluster.gateway()
    client = cluster.client(gateway)
    client.put_queue("node", lease_timeout=5, max_attempts=3)
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    endpoint = client.add_endpoint("node", url)
    start_node(cluster, node, endpoint.secret, port)
    return cluster, url, endpoint.secret


def test_inline_and_accepted_tasks_succeed(setup: tuple[Cluster, str, str]) -> None:
    cluster, _, _ = setup
    client = cluster.clients[0]
    short = client.enqueue("node", "add", {"a": 2, "b": 3, "note": "café ☕"})
    long = client.enqueue("node", "slow", {"steps": 3, "ms": 150, "value": "x"})

    done = client.wait(short.id, timeout=20)
    assert (done.state, done.result) == (TaskState.SUCCEEDED, {"sum": 5})
    (attempt,) = done.attempts
    assert (attempt.outcome, attempt.http_status) == ("succeeded", 200)  # answered inline

    done = client.wait(long.id, timeout=20)
    assert (done.state, done.result) == (TaskState.SUCCEEDED, {"value": "x", "steps": 3})
    (attempt,) = done.attempts
    assert (attempt.outcome, attempt.http_status) == ("succeeded", None)  # by callback
    assert done.progress == 1.0  # the heartbeats reached the gateway under the lease
    assert done.last_heartbeat_at is not None


def test_a_task_failing_for_good_is_not_retried(setup: tuple[Cluster, str, str]) -> None:
    cluster, _, _ = setup
    client = cluster.clients[0]
    bad = client.enqueue("node", "add", {"a": "two", "b": 3})
    done = client.wait(bad.id, timeout=20)
    assert done.state is TaskState.DEAD  # not retried; dead-lettered, as the README says
    (attempt,) = done.attempts  # 422: the attempt's outcome is failed
    assert (attempt.outcome, attempt.http_status, attempt.task_failure) == ("failed", 422, True)
    assert attempt.error == "a and b must be numbers"


def test_a_retried_task_replays_its_recorded_step(
    setup: tuple[Cluster, str, str], tmp_path: Path
) -> None:
    """``checkout`` charges in a step (a line in the ledger file), sleeps 1 s, then fails on
    attempt 1: attempt 2 gets the charge back from the push's ``steps`` without running it."""
    cluster, _, _ = setup
    client = cluster.clients[0]
    ledger = tmp_path / "ledger.txt"
    task = client.enqueue("node", "checkout", {"ledger": str(ledger), "sleep_ms": 1000})
    done = client.wait(task.id, timeout=40)
    assert done.state is TaskState.SUCCEEDED, [(a.outcome, a.error) for a in done.attempts]
    assert ledger.read_text().splitlines() == ["charge"]  # charged once in two attempts
    assert done.result == {
        "charge": {"payment": f"pay_{task.id}", "attempt": 1},  # attempt 1's, replayed
        "shipment": {"tracking": f"TRK-{task.id}", "attempt": 2},
    }
    # The sleep ended attempt 1 as released (none spent); its return failed; attempt 2 shipped.
    assert [a.outcome for a in done.attempts] == ["released", "error", "succeeded"]
    assert [(step.name, step.attempt) for step in done.steps] == [
        ("charge", 1),
        ("settle", 1),
        ("ship", 2),
    ]


def test_a_node_task_waits_for_its_event_through_the_documented_callback(
    setup: tuple[Cluster, str, str],
) -> None:
    """``approve`` waits for ``doc.approved`` of its doc with the ``wait`` callback; the event,
    sent with ``POST /v1/events``, has it pushed again with the event."""
    cluster, _, _ = setup
    client = cluster.clients[0]
    task = client.enqueue("node", "approve", {"doc": 5})
    deadline = time.monotonic() + 30
    while client.get_task(task.id).wait is None:
        assert time.monotonic() < deadline, "the wait was not recorded"
        time.sleep(0.05)
    event = client.send_event("doc.approved", {"doc": 5})
    assert [t.id for t in event.resumed] == [task.id]
    done = client.wait(task.id, timeout=30)
    assert done.state is TaskState.SUCCEEDED, [(a.outcome, a.error) for a in done.attempts]
    assert done.result == {"approval": {"id": event.id, "name": "doc.approved", "data": {"doc": 5}}}
    assert [a.outcome for a in done.attempts] == ["released", "succeeded"]


def test_a_node_task_invokes_a_child_through_the_documented_callback(
    setup: tuple[Cluster, str, str],
) -> None:
    """``order`` invokes ``add`` with the ``invoke`` callback; pushed again once the child
    ends, it returns the child's sum. A child that fails for good fails the parent with the
    child's state, id and error (the Node ``ChildFailed``, not retried)."""
    cluster, _, _ = setup
    client = cluster.clients[0]
    task = client.enqueue("node", "order", {"a": 2, "b": 3})
    done = client.wait(task.id, timeout=30)
    assert done.state is TaskState.SUCCEEDED, [(a.outcome, a.error) for a in done.attempts]
    assert done.result == {"total": 5}
    assert [a.outcome for a in done.attempts] == ["released", "succeeded"]  # none spent
    (step,) = done.steps
    assert step.name == "total"
    assert isinstance(step.result, dict)
    assert (step.result["state"], step.result["result"]) == ("succeeded", {"sum": 5})
    child = client.get_task(str(step.result["id"]))
    assert (child.queue, child.name, child.state) == ("node", "add", TaskState.SUCCEEDED)
    assert child.payload == {"a": 2, "b": 3}

    bad = client.enqueue("node", "order", {"a": "two", "b": 3})
    done = client.wait(bad.id, timeout=30)
    assert done.state is TaskState.DEAD, [(a.outcome, a.error) for a in done.attempts]
    (step,) = done.steps
    assert isinstance(step.result, dict)
    assert step.result["state"] == "dead"
    assert done.error == f"child {step.result['id']} dead: a and b must be numbers"
    assert [a.outcome for a in done.attempts] == ["released", "failed"]


def test_a_node_task_has_the_gateway_make_its_call_through_the_documented_callback(
    setup: tuple[Cluster, str, str],
) -> None:
    """``quote`` asks for a durable HTTP call with the ``call`` callback; the gateway makes it
    to a loopback service and pushes the task again with the answer."""
    cluster, _, _ = setup
    client = cluster.clients[0]
    with CallService() as service:
        task = client.enqueue("node", "quote", {"url": service.url + "/echo", "timeout": 10})
        done = client.wait(task.id, timeout=30)
        assert done.state is TaskState.SUCCEEDED, [(a.outcome, a.error) for a in done.attempts]
        body = {"n": 1, "method": "POST", "key": f"{task.id}:quote", "body": '{"item":1}'}
        assert done.result == {"status": 200, "body": body}
        assert service.count() == 1
    assert [a.outcome for a in done.attempts] == ["released", "succeeded"]


def signed(secret: str, body: bytes, message_id: str = "01JNODETEST") -> dict[str, str]:
    now = datetime.fromtimestamp(int(time.time()), tz=UTC)
    return {
        "content-type": "application/json",
        "webhook-id": message_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(secret).sign(message_id, now, body.decode()),
        "jobgate-lease": "lease-token",
        "jobgate-callback": "http://127.0.0.1:9/v1/callbacks/node/01JNODETEST",
        "jobgate-attempt": "1",
    }


def push_body(name: str, payload: object) -> bytes:
    push = {
        "id": "01JNODETEST",
        "queue": "node",
        "name": name,
        "payload": payload,
        "attempt": 1,
        "checkpoint": None,
        "lease_expires_at": "2030-01-01T00:00:00+00:00",
        "deadline": "2030-01-01T01:00:00+00:00",
    }
    return json.dumps(push, ensure_ascii=False, separators=(",", ":")).encode()


def test_the_node_worker_verifies_the_exact_bytes(setup: tuple[Cluster, str, str]) -> None:
    _, url, secret = setup
    body = push_body("add", {"a": 1, "b": 2, "note": "café"})
    good = signed(secret, body)
    with httpx.Client(timeout=10) as http:
        answer = http.post(url, content=body, headers=good)
        assert (answer.status_code, answer.json()) == (200, {"sum": 3})

        # The same JSON re-encoded (non-ASCII escaped): other bytes, so the signature fails.
        reencoded = json.dumps(json.loads(body), separators=(",", ":")).encode()
        assert reencoded != body
        refused = http.post(url, content=reencoded, headers=good)
        assert refused.status_code == 401
        assert refused.headers["content-type"] == "application/problem+json"
        assert refused.json()["title"] == "Invalid signature"

        other = "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo="
        assert http.post(url, content=body, headers=signed(other, body)).status_code == 401
        unsigned = {k: v for k, v in good.items() if k != "webhook-signature"}
        assert http.post(url, content=body, headers=unsigned).status_code == 401

        unknown = push_body("nope", None)
        answer = http.post(url, content=unknown, headers=signed(secret, unknown))
        assert answer.status_code == 404
