"""Faults that are not the endpoint's: a gateway killed mid-push must not open a healthy
endpoint's circuit, nor may tasks that raise, and a hung endpoint must not get every retry.
Real gateway and worker processes over loopback, a real Redis; SIGKILL and SIGSTOP."""

from __future__ import annotations

import itertools
import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from sdk import Backoff, TaskCreate, TaskState
from tests.support import free_port

from .conftest import STARTUP, Cluster, pushes
from .test_e2e import ECHO, until

pytestmark = pytest.mark.e2e

HOLD = "tests.e2e.worker_app.hold"
RAISES = "tests.e2e.worker_app.raises"
# What a bound from a guarantee adds for the gateway's own work on a loaded machine (a
# recoverer step, a claim and a push while other processes hold both cores).
SLACK = 1.0


def test_a_killed_gateways_tasks_are_pushed_again_within_lease_and_a_tick(
    cluster: Cluster, tmp_path: Path
) -> None:
    # Leases are 5 s and the worker heartbeats (to the gateway that pushed), so a lease ends at
    # most 5 s after the kill, and the survivor's recoverer records the expiry within a tick of
    # that. The retry then waits out the queue's backoff (the default draws the first retry's
    # delay from [0, base_delay]) and is promoted within a tick of its time. Each bound is that
    # guarantee plus SLACK, for a step and a push on a loaded machine; both are measured from
    # the instants they follow (the kill, the recorded expiry), on the gateway's clock.
    lease, tick, tasks = 5.0, 0.25, 8
    first_backoff = Backoff().base_delay
    doomed = cluster.gateway(JOBGATE_RECOVER_INTERVAL=str(tick))
    doomed_proc = cluster.procs[-1]
    client = cluster.client(doomed)
    # Default backoff and circuit breaker (5 failures open it). The queue's concurrency is the
    # number of tasks, so the doomed gateway holds every lease and the survivor claims nothing
    # before the kill. The first pushes are held (answered inline) until the test releases them
    # after the kill: longer than the survivor may take to start (its own deadline), shorter
    # than the push timeout, so the doomed gateway never gives up on one first.
    held_for = STARTUP + 2 * lease
    client.put_queue("e2e", lease_timeout=lease, max_concurrency=tasks, push_timeout=2 * held_for)
    port = free_port()
    endpoint = client.add_endpoint("e2e", f"http://127.0.0.1:{port}/", concurrency=64)
    log = tmp_path / "pushes.jsonl"
    cluster.worker(endpoint.secret, port, log, E2E_INLINE_WINDOW=str(held_for))
    held = TaskCreate(name=HOLD, payload={"args": [held_for]})
    created = client.enqueue_batch("e2e", [held.model_copy() for _ in range(tasks)])
    until(lambda: len(pushes(log)) == tasks, what="every first push")
    survivor = cluster.client(cluster.gateway(JOBGATE_RECOVER_INTERVAL=str(tick)))
    assert all(p["attempt"] == "1" for p in pushes(log)), "the survivor claimed before the kill"

    os.kill(doomed_proc.pid, signal.SIGKILL)
    killed = time.time()
    doomed_proc.wait()
    httpx.post(f"http://127.0.0.1:{port}/release")  # nothing answers the held pushes now

    for t in created:
        done = survivor.wait(t.id, timeout=30)
        assert done.state is TaskState.SUCCEEDED
        assert [a.outcome for a in done.attempts] == ["expired", "succeeded"]
        expired, succeeded = done.attempts
        assert expired.ended_at is not None
        ended = expired.ended_at.timestamp()
        assert ended - killed <= lease + tick + SLACK, f"expired {ended - killed:.2f} s after"
        again = succeeded.started_at.timestamp() - ended
        assert again <= first_backoff + tick + SLACK, f"pushed again {again:.2f} s after expiry"
    assert {p["id"] for p in pushes(log) if p["attempt"] == "2"} == {t.id for t in created}
    (state,) = survivor.list_endpoints("e2e")
    assert (state.circuit.value, state.failures) == ("closed", 0)


def test_retries_leave_a_hung_endpoint_for_a_healthy_one(cluster: Cluster, tmp_path: Path) -> None:
    gateway = cluster.gateway()
    client = cluster.client(gateway)
    # The breaker is set out of reach: the endpoint choice alone must keep tasks alive.
    client.put_queue(
        "e2e",
        push_timeout=1.0,
        lease_timeout=10.0,
        max_attempts=3,
        backoff={"strategy": "constant", "base_delay": 0.2},
        circuit_breaker={"failures": 1000},
    )
    ports = free_port(), free_port()
    # Registered first, so it would win every tie of "least in flight".
    hung = client.add_endpoint("e2e", f"http://127.0.0.1:{ports[0]}/", concurrency=64)
    healthy = client.add_endpoint("e2e", f"http://127.0.0.1:{ports[1]}/", concurrency=64)
    hung_log, healthy_log = tmp_path / "hung.jsonl", tmp_path / "healthy.jsonl"
    stopped = cluster.worker(hung.secret, ports[0], hung_log)
    cluster.worker(healthy.secret, ports[1], healthy_log)
    os.kill(stopped.pid, signal.SIGSTOP)  # accepts connections, never answers
    try:
        created = client.enqueue_batch(
            "e2e", [TaskCreate(name=ECHO, payload={"args": [i]}) for i in range(10)]
        )
        done = [client.wait(t.id, timeout=60) for t in created]
        states = [t.state for t in done]
        assert states == [TaskState.SUCCEEDED] * 10, [
            [(a.endpoint_id == hung.id, a.outcome) for a in t.attempts] for t in done
        ]
        for t in done:
            # A retry never went back to the endpoint that failed the attempt before it.
            tried = [a.endpoint_id for a in t.attempts]
            assert all(a != b for a, b in itertools.pairwise(tried)), tried
        listed = {e.id: e for e in client.list_endpoints("e2e")}
        assert listed[hung.id].error_rate > listed[healthy.id].error_rate
        assert listed[hung.id].latency_ms is not None
        assert listed[hung.id].latency_ms >= 900  # the push timeouts
    finally:
        os.kill(stopped.pid, signal.SIGCONT)


def test_tasks_that_always_raise_never_open_the_circuit_but_unmarked_500s_do(
    cluster: Cluster, tmp_path: Path
) -> None:
    client = cluster.client(cluster.gateway())
    policy: dict[str, Any] = {
        "max_attempts": 3,
        "backoff": {"strategy": "constant", "base_delay": 0.05},
        "circuit_breaker": {"failures": 3, "open_for": 60},
    }
    client.put_queue("e2e", **policy)
    client.put_queue("e2e-unmarked", **policy)
    ports = free_port(), free_port()
    sdk_worker = client.add_endpoint("e2e", f"http://127.0.0.1:{ports[0]}/", concurrency=64)
    crashing = client.add_endpoint("e2e-unmarked", f"http://127.0.0.1:{ports[1]}/")
    cluster.worker(sdk_worker.secret, ports[0], tmp_path / "sdk.jsonl")
    cluster.worker(
        crashing.secret, ports[1], tmp_path / "crash.jsonl", app="tests.e2e.failing_app:app"
    )
    # Raised inline (a marked 500) and, past the 0.5 s inline window, by the error callback.
    created = client.enqueue_batch(
        "e2e",
        [TaskCreate(name=RAISES) for _ in range(20)]
        + [TaskCreate(name=RAISES, payload={"args": [0.6]}) for _ in range(3)],
    )
    done = [client.wait(t.id, timeout=60) for t in created]
    (state,) = client.list_endpoints("e2e")
    assert (state.circuit.value, state.failures) == ("closed", 0)  # 69 failed attempts
    for t in done:
        assert t.state is TaskState.DEAD  # every attempt spent, by the queue's policy
        assert [(a.outcome.value, a.task_failure) for a in t.attempts] == [("error", True)] * 3
        assert t.attempts[0].error == "ValueError: failed by design"

    # An endpoint answering 500 without the mark is unwell: three in a row open its circuit.
    client.enqueue_batch("e2e-unmarked", [TaskCreate(name=ECHO) for _ in range(3)])
    until(
        lambda: client.list_endpoints("e2e-unmarked")[0].circuit.value == "open",
        timeout=30,
        what="the unmarked endpoint's circuit to open",
    )
