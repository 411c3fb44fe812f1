"""A pull worker process (``jobgate worker --pull``) against real gateway processes: tasks run
with heartbeats, checkpoints and logs to success; a worker SIGKILLed mid-task loses the lease,
and the task is leased again (with its checkpoint) once the lease expires; SIGTERM with the
``requeue`` policy hands running tasks back at once. Many long polls on two gateway processes
get each task once, at about one claim per task per gateway."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import Callable
from typing import Any

import httpx
from redis.asyncio import Redis

from sdk import Client
from sdk.wire import Task, TaskState
from tests import launcher

from .conftest import ADMIN, ROOT, Cluster

WORKER_KEY = "e2e-worker-key-0123456789"
QUEUE = "pulled"
KEYS = json.dumps(
    [{"key": ADMIN, "scopes": ["admin"]}, {"key": WORKER_KEY, "scopes": ["work:pull*"]}]
)


def until(check: Callable[[], Any], timeout: float = 20, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def setup(cluster: Cluster, **policy: Any) -> tuple[str, Client, str]:
    gateway = cluster.gateway(JOBGATE_API_KEYS=KEYS)
    client = cluster.client(gateway)
    client.put_queue(
        QUEUE, backoff={"strategy": "constant", "base_delay": 0.1, "max_delay": 1}, **policy
    )
    endpoint = client.add_endpoint(QUEUE, pull=True, concurrency=4)
    assert endpoint.pull
    return gateway, client, endpoint.id


def pull_worker(
    cluster: Cluster, gateway: str, endpoint_id: str, wait: float = 5, **env: str
) -> launcher.Process:
    environ = {
        **os.environ,
        "JOBGATE_URL": gateway,
        "JOBGATE_API_KEY": WORKER_KEY,
        **env,
    }
    argv = [
        "worker",
        "--pull",
        "--queue",
        QUEUE,
        "--endpoint",
        endpoint_id,
        "--wait",
        str(wait),
        "--log-level",
        "warning",
        "tests.e2e.pull_worker_app:worker",
    ]
    proc = launcher.start("gateway", argv, env=environ, cwd=ROOT)
    cluster.procs.append(proc)
    return proc


def checkpointed(client: Client, task_id: str) -> Task | None:
    task = client.get_task(task_id)
    return task if task.state is TaskState.RUNNING and task.checkpoint is not None else None


def test_pull_worker_runs_tasks_with_heartbeats_checkpoints_and_logs(cluster: Cluster) -> None:
    # Each task outlives its lease twice over: only heartbeats keep it.
    gateway, client, endpoint_id = setup(cluster, lease_timeout=1.0)
    pull_worker(cluster, gateway, endpoint_id)
    ids = [
        client.enqueue(QUEUE, "steps", {"args": [4, 0.6]}).id,
        client.enqueue(QUEUE, "steps", {"args": [2, 0.1]}).id,
    ]
    for task_id in ids:
        task = client.wait(task_id, 30)
        assert task.state is TaskState.SUCCEEDED, task
        assert len(task.attempts) == 1
        assert task.attempts[0].endpoint_id == endpoint_id
    long_task = client.get_task(ids[0])
    assert long_task.result == {"steps": 4, "attempt": 1}
    assert long_task.checkpoint == {"done": 4}
    assert [line.message for line in client.logs(ids[0])] == [f"step {i} of 4" for i in range(1, 5)]


def test_a_killed_pull_worker_task_is_leased_again_with_its_checkpoint(cluster: Cluster) -> None:
    gateway, client, endpoint_id = setup(cluster, lease_timeout=1.5)
    first = pull_worker(cluster, gateway, endpoint_id)
    task_id = client.enqueue(QUEUE, "resumable", {}).id
    until(lambda: checkpointed(client, task_id), what="the task to checkpoint")
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    pull_worker(cluster, gateway, endpoint_id)
    task = client.wait(task_id, 30)
    assert task.state is TaskState.SUCCEEDED, task
    assert task.result == {"attempt": 2, "resumed_from": {"step": 1}}
    assert len(task.attempts) == 2


def test_sigterm_with_requeue_hands_running_tasks_back_at_once(cluster: Cluster) -> None:
    gateway, client, endpoint_id = setup(cluster, lease_timeout=60)
    worker = pull_worker(cluster, gateway, endpoint_id, E2E_SHUTDOWN="requeue")
    task_id = client.enqueue(QUEUE, "resumable", {}).id
    until(lambda: checkpointed(client, task_id), what="the task to checkpoint")
    started = time.monotonic()
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(15) == 0
    task = client.get_task(task_id)
    # Back in the queue long before its 60 s lease could have run out, no attempt spent.
    assert task.state is TaskState.QUEUED, task
    assert time.monotonic() - started < 10
    # Another pull worker finishes it, resuming from the checkpoint.
    pull_worker(cluster, gateway, endpoint_id)
    task = client.wait(task_id, 30)
    assert task.state is TaskState.SUCCEEDED, task
    assert task.result == {"attempt": 1, "resumed_from": {"step": 1}}


def test_a_waiting_pull_worker_wakes_on_an_enqueue_through_another_gateway(
    cluster: Cluster,
) -> None:
    gateway, _, endpoint_id = setup(cluster)
    other = cluster.client(cluster.gateway(JOBGATE_API_KEYS=KEYS))
    pull_worker(cluster, gateway, endpoint_id, wait=50)
    # The first task proves the worker up; it polls again at once, and waits.
    first = other.enqueue(QUEUE, "steps", {"args": [1, 0]}).id
    assert other.wait(first, 30).state is TaskState.SUCCEEDED
    enqueued = time.monotonic()
    second = other.enqueue(QUEUE, "steps", {"args": [1, 0]}).id
    assert other.wait(second, 30).state is TaskState.SUCCEEDED
    # Woken over pub/sub, not at the end of its 50 s poll.
    assert time.monotonic() - enqueued < 5


async def test_polls_on_two_gateway_processes_get_each_task_once_at_about_a_claim_each(
    cluster: Cluster,
) -> None:
    gateways = [cluster.gateway(JOBGATE_API_KEYS=KEYS) for _ in range(2)]
    client = cluster.client(gateways[0])
    client.put_queue(QUEUE, max_concurrency=1000)
    endpoint_id = client.add_endpoint(QUEUE, pull=True, concurrency=1000).id
    per_gateway, tasks = 40, 80
    claims: list[str] = []  # the pull claims Redis ran: EVALSHA naming the endpoint

    async def watch(redis: Redis) -> None:
        async with redis.monitor() as monitor:
            async for info in monitor.listen():
                command = info["command"]
                if command.startswith("EVALSHA") and endpoint_id in command:
                    claims.append(command)

    async with (
        Redis.from_url(cluster.redis_url, decode_responses=True) as redis,
        httpx.AsyncClient(headers={"authorization": f"Bearer {WORKER_KEY}"}, timeout=70) as http,
    ):
        watching = asyncio.create_task(watch(redis))
        try:
            await asyncio.sleep(0.2)  # MONITOR is on before the first poll
            polls = [
                asyncio.create_task(
                    http.post(
                        f"{url}/v1/queues/{QUEUE}/leases",
                        json={"endpoint_id": endpoint_id, "wait": 50},
                    )
                )
                for url in gateways
                for _ in range(per_gateway)
            ]
            # Every poll has claimed once (the queue is empty) and waits.
            deadline = time.monotonic() + 30
            while len(claims) < 2 * per_gateway:
                assert time.monotonic() < deadline, f"{len(claims)} polls claimed"
                await asyncio.sleep(0.05)
            claims.clear()
            producer = httpx.AsyncClient(
                base_url=gateways[1], headers={"authorization": f"Bearer {ADMIN}"}, timeout=70
            )
            async with producer:
                enqueued = []
                for _ in range(tasks):
                    r = await producer.post(
                        f"/v1/queues/{QUEUE}/tasks", json={"name": "steps", "payload": {}}
                    )
                    assert r.status_code == 201, r.text
                    enqueued.append(r.json()["id"])
            answers = await asyncio.wait_for(asyncio.gather(*polls), 30)
        finally:
            watching.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await watching
    leased = [t["id"] for r in answers for t in r.json()["tasks"]]
    assert sorted(leased) == sorted(enqueued)
    print(f"\n{len(claims)} claims for {tasks} tasks, polls on two gateway processes")
    assert len(claims) <= 2.5 * tasks
