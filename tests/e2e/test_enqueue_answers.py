"""An enqueue's answer is the task as the store holds it: for every variant (debounce replace,
dedup and singleton hits, throttle delay and drop, batches), the answer equals a GET of the same
task right after it, field by field, but for the marks of how that enqueue went
(``deduplicated``, ``flow.replaced``, ``flow.throttled: dropped``). A real gateway process over
loopback and a real Redis; the queue is paused, so nothing changes the tasks in between."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from sdk import task

from .conftest import Cluster

NAME = "tests.e2e.worker_app.echo"
TRACE_1 = "00-11111111111111111111111111111111-1111111111111111-01"
TRACE_2 = "00-22222222222222222222222222222222-2222222222222222-01"


@pytest.fixture
def api(cluster: Cluster) -> Iterator[httpx.Client]:
    cluster.gateway()
    with cluster.api() as client:
        answer = client.put("/v1/queues/q", json={"paused": True, "key_concurrency": {"limit": 1}})
        assert answer.status_code in (200, 201), answer.text
        yield client


def _get(api: httpx.Client, task_id: str) -> dict[str, Any]:
    answer = api.get(f"/v1/tasks/{task_id}")
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


def _as_stored(answer: dict[str, Any]) -> dict[str, Any]:
    """The answer less the marks that say how this enqueue went (a GET has none of them)."""
    task = {**answer, "deduplicated": False}
    flow = task.get("flow")
    if flow is not None:
        flow = {**flow, "replaced": False}
        if flow["throttled"] == "dropped":
            flow["throttled"] = None
        task["flow"] = None if flow == _NO_FLOW else flow
    return task


_NO_FLOW = {"debounce_key": None, "debounce_seq": None, "replaced": False, "throttled": None}


def _spec(i: int, **extra: Any) -> dict[str, Any]:
    """A task specification whose every field the answer shows differs with ``i``."""
    return {
        "name": NAME,
        "payload": {"args": [i]},
        "priority": i,
        "owner": f"owner-{i}",
        "max_attempts": i + 1,
        "capability": f"cap-{i}",
        "version": f"v{i}",
        "notify": f"http://127.0.0.1:{9000 + i}/done",
        "traceparent": TRACE_1 if i == 1 else TRACE_2,
        "concurrency_key": f"ck-{i}",
        **extra,
    }


def test_a_debounce_replace_answers_the_pending_task_as_stored(api: httpx.Client) -> None:
    debounce = {"key": "doc-7", "window": 600}
    first = api.post("/v1/queues/q/tasks", json=_spec(1, debounce=debounce))
    assert first.status_code == 201, first.text
    second = api.post("/v1/queues/q/tasks", json=_spec(2, debounce=debounce))
    assert second.status_code == 200, second.text
    answer = second.json()
    stored = _get(api, answer["id"])
    assert answer["flow"]["replaced"] is True
    assert answer["flow"]["debounce_seq"] == 2
    assert _as_stored(answer) == stored
    # Only the payload (and run_at) is the second enqueue's: the rest stays the first's.
    assert stored["payload"] == {"args": [2]}
    kept = ("priority", "owner", "max_attempts", "capability", "version", "notify")
    assert {k: stored[k] for k in kept} == {k: first.json()[k] for k in kept}
    assert stored["trace_id"] == TRACE_1[3:35]
    assert stored["concurrency_key"] == "ck-1"


def test_a_debounce_replace_in_a_batch_answers_the_pending_task_as_stored(
    api: httpx.Client,
) -> None:
    debounce = {"key": "doc-8", "window": 600}
    tasks = [_spec(1, debounce=debounce), _spec(2, debounce=debounce)]
    answer = api.post("/v1/queues/q/tasks/batch", json={"tasks": tasks})
    assert answer.status_code == 201, answer.text
    made, replaced = answer.json()["tasks"]
    assert replaced["id"] == made["id"]
    assert replaced["flow"]["replaced"] is True
    assert _as_stored(replaced) == _get(api, made["id"])


@pytest.mark.parametrize("key", ["dedup_key", "singleton_key"])
def test_a_dedup_or_singleton_hit_answers_the_earlier_task_as_stored(
    api: httpx.Client, key: str
) -> None:
    first = api.post("/v1/queues/q/tasks", json=_spec(1, **{key: "k"}))
    assert first.status_code == 201, first.text
    again = api.post("/v1/queues/q/tasks", json=_spec(2, **{key: "k"}))
    assert again.status_code == 200, again.text
    answer = again.json()
    assert answer["deduplicated"] is True
    assert answer["id"] == first.json()["id"]
    assert _as_stored(answer) == _get(api, answer["id"]) == first.json()
    batch = api.post("/v1/queues/q/tasks/batch", json={"tasks": [_spec(3, **{key: "k"})]})
    (member,) = batch.json()["tasks"]
    assert member["deduplicated"] is True
    assert _as_stored(member) == _get(api, first.json()["id"])


def test_a_throttle_delayed_task_reads_as_its_enqueue_answered(api: httpx.Client) -> None:
    throttle = {"key": "acct", "window": 600, "limit": 1, "mode": "delay"}
    through = api.post("/v1/queues/q/tasks", json=_spec(1, throttle=throttle))
    assert through.status_code == 201, through.text
    assert through.json()["flow"] is None
    delayed = api.post("/v1/queues/q/tasks", json=_spec(2, throttle=throttle))
    assert delayed.status_code == 201, delayed.text
    answer = delayed.json()
    assert answer["flow"]["throttled"] == "delayed"
    assert answer["state"] == "scheduled"
    assert _get(api, answer["id"]) == answer
    assert _get(api, through.json()["id"]) == through.json()
    members = [_spec(3, throttle=throttle), _spec(4, throttle=throttle)]
    batch = api.post("/v1/queues/q/tasks/batch", json={"tasks": members})
    assert batch.status_code == 201, batch.text
    for member in batch.json()["tasks"]:
        assert member["flow"]["throttled"] == "delayed"
        assert _get(api, member["id"]) == member


def test_a_throttle_drop_answers_the_task_let_through_as_stored(api: httpx.Client) -> None:
    throttle = {"key": "acct", "window": 600, "limit": 1}
    through = api.post("/v1/queues/q/tasks", json=_spec(1, throttle=throttle))
    assert through.status_code == 201, through.text
    dropped = api.post("/v1/queues/q/tasks", json=_spec(2, throttle=throttle))
    assert dropped.status_code == 200, dropped.text
    answer = dropped.json()
    assert answer["flow"]["throttled"] == "dropped"
    assert _as_stored(answer) == _get(api, through.json()["id"]) == through.json()


def test_batch_members_waiting_on_dependencies_answer_as_stored(api: httpx.Client) -> None:
    """Dependencies the script finds met, matched to an earlier task, or failed, and one in
    another queue that its link finds failed: each member answers with the depends_on,
    waiting_on, state and error its record holds."""
    earlier = api.post("/v1/queues/q/tasks", json={"name": NAME, "dedup_key": "e"}).json()
    gone = api.post("/v1/queues/q/tasks", json={"name": NAME}).json()
    assert api.post(f"/v1/tasks/{gone['id']}/cancel").status_code == 200
    assert api.put("/v1/queues/r", json={"paused": True}).status_code in (200, 201)
    elsewhere = api.post("/v1/queues/r/tasks", json={"name": NAME}).json()
    assert api.post(f"/v1/tasks/{elsewhere['id']}/cancel").status_code == 200
    tasks = [
        {"id": "01JAAAAAAAAAAAAAAAAAAAAAA1", "name": NAME, "dedup_key": "e"},
        {"name": NAME, "depends_on": ["01JAAAAAAAAAAAAAAAAAAAAAA1"]},
        {"name": NAME, "depends_on": [earlier["id"], "01JAAAAAAAAAAAAAAAAAAAAAA1"]},
        {"name": NAME, "depends_on": [gone["id"]]},
        {"name": NAME, "group": "g"},
        {"name": NAME, "after_group": "g", "depends_on": ["01JAAAAAAAAAAAAAAAAAAAAAA1"]},
        {"name": NAME, "depends_on": [elsewhere["id"]]},
    ]
    answer = api.post("/v1/queues/q/tasks/batch", json={"tasks": tasks})
    assert answer.status_code == 201, answer.text
    members = answer.json()["tasks"]
    differ = [i for i, m in enumerate(members) if _as_stored(m) != _get(api, m["id"])]
    assert differ == []
    assert members[0]["deduplicated"] is True
    assert members[1]["depends_on"] == [earlier["id"]]
    assert members[2]["waiting_on"] == [earlier["id"]]
    assert members[3]["state"] in ("failed", "dead")
    assert members[3]["error"] == f"dependency {gone['id']} did not succeed: cancelled"
    assert members[5]["waiting_on"] == [earlier["id"], "group:g"]
    assert members[6]["state"] in ("failed", "dead")


def test_sdk_answers_and_handles_of_a_debounce_replace_show_the_task_as_stored(
    cluster: Cluster, api: httpx.Client
) -> None:
    client = cluster.client(cluster.gateways[0])
    debounce = {"key": "doc-9", "window": 600}
    first = client.enqueue("q", NAME, {"args": [1]}, priority=1, owner="a", debounce=debounce)
    second = client.enqueue("q", NAME, {"args": [2]}, priority=2, owner="b", debounce=debounce)
    assert second.id == first.id
    assert second.flow is not None
    assert second.flow.replaced
    assert (second.priority, second.owner, second.payload) == (1, "a", {"args": [2]})

    @task("q", name=NAME, client=client, priority=3, version="v3")
    def echo(*args: object) -> None:
        raise AssertionError("not run here")

    handle = echo.apply([3], debounce=debounce)
    assert (handle.id, handle.replaced, handle.debounce_seq) == (first.id, True, 3)
    stored = handle.task
    assert (stored.priority, stored.owner, stored.version) == (1, "a", None)
    assert stored.payload == {"args": [3], "kwargs": {}}
