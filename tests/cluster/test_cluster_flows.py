"""A real gateway on a real Redis Cluster (three primaries), pushing to a scripted worker over
loopback: the main task flows, with queues whose keys live on different primaries."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from redis.cluster import RedisCluster
from starlette.applications import Starlette
from starlette.routing import Route

from tests.integration.test_dispatch import ADMIN, Rig, Worker
from tests.support import live_gateway, serve

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
