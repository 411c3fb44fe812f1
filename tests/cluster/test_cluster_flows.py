"""A real gateway on a real Redis Cluster (three primaries), pushing to a scripted worker over
loopback: the main task flows, with queues whose keys live on different primaries."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster
from starlette.applications import Starlette
from starlette.routing import Route

from gateway.store import keys
from gateway.store.connection import connect
from gateway.store.gauges import GaugeStore
from gateway.store.index import BUCKETS, IndexRepair
from gateway.store.keys import JobKeys
from gateway.store.run_ends import end_field
from gateway.store.scripts import Scripts
from sdk.wire import TaskState
from tests.scripted_worker import ADMIN, Rig, Worker
from tests.support import live_gateway, serve, until

# Two queues whose hash tags fall on different primaries (checked by the first test).
LEFT, RIGHT = "left", "right"


def primary_of(client: RedisCluster, queue: str) -> str:
    slot = client.keyslot(f"jg:{{{queue}}}:queue")
    return str(client.nodes_manager.get_node_from_slot(slot).name)


@pytest.fixture
async def workers() -> dict[str, Worker]:
    """One scripted worker per queue (each endpoint has its own signing secret)."""
    return {LEFT: Worker(), RIGHT: Worker()}


@pytest.fixture
async def rig(cluster_url: str, workers: dict[str, Worker]) -> AsyncIterator[Rig]:
    """A gateway on the cluster, with queues LEFT and RIGHT each served by its worker;
    ``rig.worker`` is LEFT's."""
    left, right = (
        Starlette(routes=[Route("/", workers[queue].handle, methods=["POST"])])
        for queue in (LEFT, RIGHT)
    )
    async with (
        serve(left) as left_url,
        serve(right) as right_url,
        live_gateway(cluster_url, ADMIN) as (gateway_url, api),
    ):
        rig = Rig(api, workers[LEFT], gateway_url)
        backoff = {"strategy": "constant", "base_delay": 0.05, "max_delay": 1}
        for queue, url in ((LEFT, left_url), (RIGHT, right_url)):
            await rig.queue(queue, max_attempts=2, backoff=backoff)
            r = await api.post(f"/v1/queues/{queue}/endpoints", json={"url": url + "/"})
            assert r.status_code == 201, r.text
            workers[queue].secret = r.json()["secret"]
        yield rig


def test_the_two_queues_live_on_different_primaries(redis_cluster: list[int]) -> None:
    with RedisCluster(host="127.0.0.1", port=redis_cluster[0]) as client:
        assert primary_of(client, LEFT) != primary_of(client, RIGHT)


async def test_a_task_is_pushed_and_succeeds(rig: Rig) -> None:
    task_id = await rig.enqueue("echo", {"n": 1}, queue=LEFT)
    task = await rig.finished(task_id)
    assert (task["state"], task["result"]) == ("succeeded", {"echo": {"n": 1}})


async def test_readiness_is_200(rig: Rig) -> None:
    r = await rig.api.get("/readyz")
    assert r.status_code == 200, r.text
    assert r.json()["ready"] is True


async def test_a_failed_attempt_is_retried_then_succeeds(rig: Rig) -> None:
    answers = iter([(500, {"error": "boom"}), (200, "second time")])
    rig.worker.script["flaky"] = lambda push: next(answers)
    task_id = await rig.enqueue("flaky", queue=LEFT)
    task = await rig.finished(task_id)
    assert (task["state"], task["result"]) == ("succeeded", "second time")
    assert [a["outcome"] for a in task["attempts"]] == ["error", "succeeded"]


async def test_a_task_out_of_attempts_is_dead_lettered(rig: Rig) -> None:
    rig.worker.script["broken"] = (500, {"error": "always"})
    task_id = await rig.enqueue("broken", queue=LEFT)
    task = await rig.finished(task_id)
    assert (task["state"], task["error"]) == ("dead", "always")
    assert len(task["attempts"]) == 2
    dead = (await rig.api.get(f"/v1/queues/{LEFT}/tasks", params={"state": "dead"})).json()
    assert [t["id"] for t in dead["items"]] == [task_id]


async def test_a_dependency_on_a_task_of_a_queue_on_another_primary(
    rig: Rig, workers: dict[str, Worker]
) -> None:
    first = await rig.enqueue("first", queue=RIGHT)
    second = await rig.enqueue("second", queue=LEFT, depends_on=[first])
    done = await rig.finished(second)
    assert done["state"] == "succeeded"
    assert [p.id for _, p in workers[RIGHT].received] == [first]
    assert (await rig.task(first))["state"] == "succeeded"


async def test_a_failed_dependency_fails_its_dependent_on_another_primary(
    rig: Rig, workers: dict[str, Worker]
) -> None:
    workers[RIGHT].script["doomed"] = (422, {"error": "no", "retryable": False})
    first = await rig.enqueue("doomed", queue=RIGHT)
    second = await rig.enqueue("never", queue=LEFT, depends_on=[first])
    done = await rig.finished(second)
    assert done["state"] in ("failed", "dead")
    assert rig.worker.pushes(second) == []


async def test_a_batch_with_a_taken_id_stores_nothing(rig: Rig, cluster_url: str) -> None:
    taken = await rig.enqueue("x", queue=RIGHT, id="01ARZ3NDEKTSV4RRFFQ69G5FAV")
    mine = await rig.enqueue("x", queue=LEFT, id="01ARZ3NDEKTSV4RRFFQ69G5FAW")
    fresh = [
        "01BX5ZZKBKACTAV9WEVGEMMVRZ",
        "01BX5ZZKBKACTAV9WEVGEMMVS0",
        "01BX5ZZKBKACTAV9WEVGEMMVS1",
    ]
    batch = {"tasks": [{"name": "a", "id": task_id} for task_id in [*fresh, mine, taken]]}
    r = await rig.api.post(f"/v1/queues/{LEFT}/tasks/batch", json=batch)
    assert r.status_code == 409, r.text
    for task_id in fresh:  # their index entries, on several slots, were taken back
        assert (await rig.api.get(f"/v1/tasks/{task_id}")).status_code == 404
    again = await rig.api.post(f"/v1/queues/{LEFT}/tasks/batch", json={"tasks": batch["tasks"][:3]})
    assert again.status_code == 201, again.text


async def test_the_id_index_spreads_over_primaries_and_its_repair_reads_them_all(
    rig: Rig, cluster_url: str
) -> None:
    """The index's buckets lie on every primary; the repair reads them and asks each queue's
    primary; a task indexed the old way (a key per task) is still found."""
    tasks = [await rig.enqueue("x", queue=queue) for queue in (LEFT, RIGHT, LEFT, RIGHT)]
    legacy = "01BX5ZZKBKACTAV9WEVGEMMVT0"
    await rig.enqueue("x", queue=RIGHT, id=legacy)
    orphans = ["01BX5ZZKBKACTAV9WEVGEMMVT1", "01BX5ZZKBKACTAV9WEVGEMMVT2"]
    client = await connect(cluster_url)
    try:
        await client.hdel(keys.task_index(legacy), legacy)
        await client.set(keys.legacy_task_index(legacy), RIGHT)
        for orphan, queue in zip(orphans, (LEFT, RIGHT), strict=True):
            await client.hset(keys.task_index(orphan), orphan, queue)
        nodes = client.nodes_manager  # type: ignore[attr-defined]
        primaries = {nodes.get_node_from_slot(client.keyslot(b)).name for b in BUCKETS}  # type: ignore[attr-defined]
        assert len(primaries) == 3
        repair = IndexRepair(client, Scripts(client))
        assert (await repair.repair(), await repair.repair()) == (0, 2)
    finally:
        await client.aclose()
    for task_id in [*tasks, legacy]:
        assert (await rig.api.get(f"/v1/tasks/{task_id}")).status_code == 200
    for task_id in orphans:
        assert (await rig.api.get(f"/v1/tasks/{task_id}")).status_code == 404
    # Deleting a queue drops its tasks' entries, in buckets on every primary, and older keys.
    assert (await rig.api.delete(f"/v1/queues/{RIGHT}?force=true")).status_code == 204
    for task_id in [*tasks, legacy]:
        expected = 404 if task_id in tasks[1::2] or task_id == legacy else 200
        assert (await rig.api.get(f"/v1/tasks/{task_id}")).status_code == expected
    client = await connect(cluster_url)
    try:
        assert await client.exists(keys.legacy_task_index(legacy)) == 0
    finally:
        await client.aclose()


async def test_a_recurring_job_fires_and_its_task_runs(rig: Rig) -> None:
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)
    r = await rig.api.post(
        "/v1/jobs",
        json={
            "title": "tick",
            "task": {"queue": RIGHT, "name": "tick"},
            "schedule": {"kind": "interval", "seconds": 1, "start_at": start.isoformat()},
        },
    )
    assert r.status_code == 201, r.text
    job_id = r.json()["id"]

    async def succeeded_run() -> bool:
        runs = (await rig.api.get(f"/v1/jobs/{job_id}/runs")).json()["items"]
        return any(run["status"] == "success" for run in runs)

    await until(succeeded_run, timeout=10, what="a run of the job to succeed")
    assert (await rig.api.delete(f"/v1/jobs/{job_id}")).status_code == 204


async def test_a_run_keeps_its_end_in_its_jobs_slot(rig: Rig, cluster_url: str) -> None:
    """The run's end crosses from its queue's slot to its job's through the outbox."""
    r = await rig.api.post(
        "/v1/jobs", json={"title": "by hand", "task": {"queue": RIGHT, "name": "tick"}}
    )
    job_id = r.json()["id"]
    run_id = (await rig.api.post(f"/v1/jobs/{job_id}/runs", json={})).json()["id"]
    runs = JobKeys.of(job_id).run
    client = await connect(cluster_url)
    try:
        assert client.keyslot(runs) != client.keyslot(f"jg:{{{RIGHT}}}:outbox")  # type: ignore[attr-defined]
        kept = await until(
            lambda: client.hget(runs, end_field(run_id)), timeout=30, what="the run's end kept"
        )
    finally:
        await client.aclose()
    assert json.loads(kept)["state"] == "succeeded"
    run = (await rig.api.get(f"/v1/jobs/{job_id}/runs/{run_id}")).json()
    assert (run["status"], run["attempts"]) == ("success", 1)


async def test_scripts_flushed_from_every_node_are_loaded_again(
    rig: Rig, redis_cluster: list[int]
) -> None:
    for port in redis_cluster:
        with redis.Redis(host="127.0.0.1", port=port) as node:
            node.script_flush()
    task_id = await rig.enqueue("echo", "after the flush", queue=RIGHT)
    assert (await rig.finished(task_id))["state"] == "succeeded"


async def test_the_gauges_read_depths_of_queues_on_different_primaries(
    rig: Rig, cluster_url: str
) -> None:
    await rig.queue("parked", max_attempts=1)  # no endpoint: its task stays queued
    await rig.enqueue("x", queue="parked")
    client = await connect(cluster_url)
    try:
        reading = await GaugeStore(client).read(["parked", LEFT, RIGHT])
    finally:
        await client.aclose()
    assert reading.queues == {"parked", LEFT, RIGHT}
    assert reading.depth["parked"][TaskState.QUEUED] == 1
    assert sum(reading.depth[RIGHT].values()) == 0


async def test_tasks_of_a_concurrency_key_run_and_leave_no_count(
    rig: Rig, redis_cluster: list[int]
) -> None:
    """Per-key concurrency's scripts on the cluster: held tasks go as their key's tasks end,
    a policy change moves the rest, and nothing of the key is left."""
    r = await rig.api.patch(f"/v1/queues/{LEFT}", json={"key_concurrency": {"limit": 1}})
    assert r.status_code == 200, r.text
    ids = [await rig.enqueue("echo", {"n": n}, queue=LEFT, concurrency_key="a") for n in range(4)]
    r = await rig.api.patch(f"/v1/queues/{LEFT}", json={"remove_key_concurrency": True})
    assert r.status_code == 200, r.text
    for task_id in ids:
        assert (await rig.finished(task_id))["state"] == "succeeded"
    with RedisCluster(host="127.0.0.1", port=redis_cluster[0]) as client:
        assert client.exists(f"jg:{{{LEFT}}}:key_counts") == 0


async def test_debounce_and_throttle_on_queues_of_different_primaries(rig: Rig) -> None:
    async def again(queue: str, payload: int, **option: object) -> dict[str, Any]:
        """An enqueue that stores nothing new (200): the task it names."""
        body = {"name": "echo", "payload": payload, **option}
        r = await rig.api.post(f"/v1/queues/{queue}/tasks", json=body)
        assert r.status_code == 200, r.text
        return dict(r.json())

    for queue in (LEFT, RIGHT):
        debounce = {"key": "doc-1", "window": 1}
        first = await rig.enqueue("echo", 1, queue=queue, debounce=debounce)
        later = await again(queue, 2, debounce=debounce)
        assert (later["id"], later["flow"]["replaced"]) == (first, True)
        done = await rig.finished(first)
        assert (done["state"], done["result"]) == ("succeeded", {"echo": 2})
        throttle = {"key": "acct-1", "window": 60}
        let = await rig.enqueue("echo", 3, queue=queue, throttle=throttle)
        dropped = await again(queue, 4, throttle=throttle)
        assert (dropped["id"], dropped["flow"]) == (
            let,
            {**dropped["flow"], "throttled": "dropped"},
        )
