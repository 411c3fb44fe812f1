"""Two gateway versions on one Redis: the tree of :data:`OLDER` (the last before the ready set's
shorter members, ``lua/ready.lua``), exported with ``git archive`` and run as its own process
with its own ``PYTHONPATH``, and this tree.

Tasks an older gateway stored (queued at several priorities, scheduled, waiting on a dependency,
running under a lease with a checkpoint and a step) are run by a newer gateway, each once, in
priority order once the newer gateway's start has rewritten their members; and both versions
serving one queue at once (a rolling upgrade) lose and repeat nothing; an older gateway's cancel
of a task a newer one queued fails and changes nothing, as docs/operator-guide.md ("Redis")
says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis import Redis

from sdk.wire import HEADER_LEASE, TaskState
from tests.support import free_port

from .conftest import ADMIN, ROOT, Cluster, wait_http
from .test_e2e import until

# main just before the shorter ready member (issue 32, item 2).
OLDER = "226bcb9698568ac2ed062e01de0192845823648d"
QUEUE = "up"


@pytest.fixture(scope="module")
def older_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", OLDER, "gateway", "sdk"],
        capture_output=True,
        check=False,
    )
    if archive.returncode != 0:
        pytest.skip(f"the older tree {OLDER[:7]} is not in this checkout's history")
    tree = tmp_path_factory.mktemp("older")
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return tree


def older_gateway(cluster: Cluster, tree: Path) -> str:
    """A gateway of the older tree, as :meth:`Cluster.gateway` starts one of this tree."""
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(tree),
        "JOBGATE_REDIS_URL": cluster.redis_url,
        "JOBGATE_PORT": str(port),
        "JOBGATE_API_KEYS": json.dumps([{"key": ADMIN, "scopes": ["admin"]}]),
        "JOBGATE_ALLOW_PRIVATE_ENDPOINTS": "true",
        "JOBGATE_RECOVER_INTERVAL": "0.05",
        "JOBGATE_LOG_LEVEL": "warning",
    }
    proc = subprocess.Popen([sys.executable, "-m", "gateway", "serve"], env=env, cwd=tree)
    cluster.procs.append(proc)
    url = f"http://127.0.0.1:{port}"
    wait_http(f"{url}/healthz", proc)
    cluster.gateways.append(url)
    return url


@pytest.fixture
def redis(redis_url: str) -> Iterator[Redis]:
    client = Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


def api(gateway: str) -> httpx.Client:
    return httpx.Client(base_url=gateway, headers={"authorization": f"Bearer {ADMIN}"}, timeout=70)


def enqueue(http: httpx.Client, **task: Any) -> str:
    answer = http.post(f"/v1/queues/{QUEUE}/tasks", json={"name": "t", **task})
    assert answer.status_code in (200, 201), answer.text
    return str(answer.json()["id"])


def lease(http: httpx.Client, endpoint: str, most: int = 100) -> list[dict[str, Any]]:
    answer = http.post(
        f"/v1/queues/{QUEUE}/leases", json={"endpoint_id": endpoint, "max_tasks": most}
    )
    assert answer.status_code == 200, answer.text
    return list(answer.json()["tasks"])


def callback(http: httpx.Client, item: dict[str, Any], kind: str, body: Any) -> httpx.Response:
    return http.post(
        f"/v1/callbacks/{QUEUE}/{item['id']}/{kind}",
        json=body,
        headers={HEADER_LEASE: item["lease"]},
    )


def succeed(http: httpx.Client, item: dict[str, Any]) -> None:
    answer = callback(http, item, "result", {"result": item["id"]})
    assert answer.status_code == 200, answer.text


def setup_queue(http: httpx.Client) -> str:
    put = http.put(f"/v1/queues/{QUEUE}", json={"lease_timeout": 60})
    assert put.status_code in (200, 201), put.text
    made = http.post(f"/v1/queues/{QUEUE}/endpoints", json={"pull": True, "concurrency": 100})
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


def older_members(redis: Redis) -> list[str]:
    """Ready members of the older shape: hex digits right after the capability's '/'."""
    return [m for m in redis.zrange(f"jg:{{{QUEUE}}}:ready", 0, -1) if m[1] in "0123456789abcdef"]


def test_tasks_an_older_gateway_stored_run_once_on_a_newer_one(
    cluster: Cluster, older_tree: Path, redis: Redis
) -> None:
    with api(older_gateway(cluster, older_tree)) as old:
        endpoint = setup_queue(old)
        running = enqueue(old)
        (leased,) = lease(old, endpoint)
        assert leased["id"] == running
        assert callback(old, leased, "checkpoint", {"state": {"done": 1}}).is_success
        assert callback(old, leased, "step", {"name": "one", "result": 1}).is_success
        queued = [enqueue(old, priority=p) for p in (0, 5, 0, -3, 5, 0)]
        parent = enqueue(old, priority=-10)
        waiting = enqueue(old, depends_on=[parent])
        scheduled = enqueue(old, delay=1.5, priority=-20)  # last, when due before the lease
        assert len(older_members(redis)) == 7
        assert json.loads(redis.hget(f"jg:{{{QUEUE}}}:meta", queued[0]))["sq"] > 0
    cluster.stop()
    cluster.procs.clear()

    with api(cluster.gateway()) as new:
        until(lambda: not older_members(redis), 30, "the newer gateway to rewrite older members")
        # The lease taken by the older gateway still fences: a wrong token changes nothing.
        assert callback(new, {**leased, "lease": "x" * 32}, "result", {}).status_code in (403, 409)
        succeed(new, leased)
        first = lease(new, endpoint, 7)
        by_priority = [queued[i] for i in (1, 4, 0, 2, 5, 3)] + [parent]
        assert [item["id"] for item in first] == by_priority
        for item in first:
            succeed(new, item)
        later: list[dict[str, Any]] = []
        until(lambda: later.extend(lease(new, endpoint)) or len(later) == 2, 30, "the other two")
        assert {item["id"] for item in later} == {waiting, scheduled}
        for item in later:
            succeed(new, item)
        everything = [running, *queued, parent, waiting, scheduled]
        for task_id in everything:
            task = new.get(f"/v1/tasks/{task_id}").json()
            assert task["state"] == TaskState.SUCCEEDED.value, task
            assert len(task["attempts"]) == 1, task
        kept = new.get(f"/v1/tasks/{running}").json()
        assert kept["checkpoint"] == {"done": 1}
        assert [step["name"] for step in kept["steps"]] == ["one"]
        assert lease(new, endpoint) == []


def test_a_rolling_upgrade_loses_and_repeats_nothing(
    cluster: Cluster, older_tree: Path, redis: Redis
) -> None:
    """Both versions enqueue and lease on one queue at once; each task is leased once and ends
    once, whichever gateway stored it, leased it or took its result."""
    gateways = [older_gateway(cluster, older_tree), cluster.gateway()]
    clients = [api(g) for g in gateways]
    try:
        endpoint = setup_queue(clients[0])
        made = [enqueue(clients[i % 2], priority=i % 3) for i in range(40)]
        assert older_members(redis)
        cancelled = made[0]  # queued by the older gateway, cancelled through the newer one
        assert clients[1].post(f"/v1/tasks/{cancelled}/cancel").status_code == 200
        # The older gateway cannot cancel a task the newer one queued (docs/operator-guide.md,
        # "Redis"): it fails, and the task stays queued, to run below.
        refused = clients[0].post(f"/v1/tasks/{made[1]}/cancel")
        assert refused.status_code == 500, refused.text
        assert clients[1].get(f"/v1/tasks/{made[1]}").json()["state"] == "queued"
        seen: list[str] = []
        turn = 0
        while len(seen) < len(made) - 1:
            items = lease(clients[turn % 2], endpoint, 7)
            for item in items:
                succeed(clients[(turn + 1) % 2], item)  # the result through the other version
            seen += [item["id"] for item in items]
            if turn < 6:  # more enqueues while both drain
                made.append(enqueue(clients[turn % 2]))
            turn += 1
            assert turn < 200, "the queue did not drain"
        assert len(seen) == len(set(seen))
        assert set(seen) == set(made) - {cancelled}
        for task_id in made:
            state = clients[turn % 2].get(f"/v1/tasks/{task_id}").json()["state"]
            expected = TaskState.CANCELLED if task_id == cancelled else TaskState.SUCCEEDED
            assert state == expected.value
    finally:
        for client in clients:
            client.close()
