"""Chains and chords end to end: a gateway and an SDK worker process pass results along."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sdk import Client, TaskFailed, TaskState, chain, chord, group, task
from tests.support import free_port

from .conftest import Cluster

pytestmark = pytest.mark.e2e

ENDED_BADLY = (TaskState.FAILED, TaskState.DEAD)  # dead once dead-lettered (the default)


def producer_side(client: Client) -> tuple[Any, Any, Any, Any, Any]:
    """The worker's task functions as a producer declares them (same names, same queue)."""

    def add(x: int, y: int) -> int: ...

    def scale(x: int, factor: int) -> int: ...

    def collect(values: list[Any], label: str) -> dict[str, Any]: ...

    def refuse(x: int) -> int: ...

    def echo(value: Any) -> Any: ...

    made = [
        task(queue="e2e", name=f"tests.e2e.worker_app.{fn.__name__}", client=client)(fn)
        for fn in (add, scale, collect, refuse, echo)
    ]
    return made[0], made[1], made[2], made[3], made[4]


def start(cluster: Cluster, tmp_path: Path) -> Client:
    client = cluster.client(cluster.gateway())
    client.put_queue("e2e", max_attempts=3)
    port = free_port()
    endpoint = client.add_endpoint("e2e", f"http://127.0.0.1:{port}/", concurrency=16)
    log = tmp_path / "pushes.jsonl"
    cluster.worker(endpoint.secret, port, log)
    return client


def test_a_three_task_chain_passes_each_result_to_the_next(
    cluster: Cluster, tmp_path: Path
) -> None:
    client = start(cluster, tmp_path)
    add, scale, _, _, _ = producer_side(client)
    handle = chain(add.s(1, 2), scale.s(10), add.s(5)).delay()
    assert handle.result(timeout=30) == (1 + 2) * 10 + 5
    first, second, third = (client.get_task(t.id) for t in handle.tasks)
    assert [t.result for t in (first, second, third)] == [3, 30, 35]
    assert (first.pass_results, second.depends_on) == (False, [first.id])
    assert third.pass_results is True


def test_a_chord_callback_gets_the_group_results_in_order(cluster: Cluster, tmp_path: Path) -> None:
    client = start(cluster, tmp_path)
    add, _, collect, _, _ = producer_side(client)
    members = group(*(add.s(i, 100) for i in range(5)))
    handle = chord(members, collect.s(label="sums")).delay()
    assert handle.result(timeout=30) == {"label": "sums", "values": [100, 101, 102, 103, 104]}
    assert len(handle.tasks) == 6


def test_a_failing_middle_task_fails_the_rest_of_the_chain_with_a_reason(
    cluster: Cluster, tmp_path: Path
) -> None:
    client = start(cluster, tmp_path)
    add, _, _, refuse, _ = producer_side(client)
    handle = chain(add.s(1, 2), refuse.s(), add.s(5), add.s(6)).delay()
    with pytest.raises(TaskFailed):
        handle.result(timeout=30)
    first, middle, third, fourth = (client.get_task(t.id) for t in handle.tasks)
    assert first.state is TaskState.SUCCEEDED
    assert middle.state in ENDED_BADLY
    assert "refused 3 by design" in (middle.error or "")
    for later in (third, fourth):
        assert later.state in ENDED_BADLY
        assert later.attempt == 0  # never pushed
    assert middle.id in (third.error or "")
    assert third.id in (fourth.error or "")


def test_a_cancelled_link_fails_the_rest_of_the_chain(cluster: Cluster, tmp_path: Path) -> None:
    client = start(cluster, tmp_path)
    add, _, _, _, _ = producer_side(client)
    first = add.s(1, 2).set(delay=3600)
    handle = chain(first, add.s(5)).delay()
    client.cancel(handle.tasks[0].id)
    ended = client.wait(handle.tasks[1].id, timeout=20)
    assert ended.state in ENDED_BADLY
    assert handle.tasks[0].id in (ended.error or "")


def test_a_link_matched_by_its_dedup_key_passes_the_earlier_tasks_result(
    cluster: Cluster, tmp_path: Path
) -> None:
    """A chain's first link with the dedup key of a task that already ran is that task: it does
    not run again, and the next link gets its result."""
    client = start(cluster, tmp_path)
    add, scale, _, _, _ = producer_side(client)
    earlier = add.apply(args=(1, 2), dedup_key="sum-1-2")
    assert earlier.result(timeout=30) == 3
    handle = chain(add.s(1, 2).set(dedup_key="sum-1-2"), scale.s(10)).delay()
    assert handle.result(timeout=30) == 30
    first, second = handle.tasks
    assert (first.id, first.deduplicated) == (earlier.id, True)
    assert len(client.get_task(earlier.id).attempts) == 1  # it ran once, for the first enqueue
    assert client.get_task(second.id).depends_on == [earlier.id]
