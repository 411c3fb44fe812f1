"""``group()``: task runs (``.s()``) enqueued in one batch request, with dependents."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
import respx

from sdk import (
    AsyncClient,
    AsyncGroupHandle,
    Client,
    GroupHandle,
    TaskFailed,
    TaskSignature,
    TaskTimeout,
    group,
    task,
)
from sdk.wire import TaskState

URL = "http://gateway.test"
NOW = datetime(2030, 1, 1, tzinfo=UTC).isoformat()
IDS = [f"01J0000000000000000000000{i}" for i in range(10)]


def record(index: int, state: str = "queued", **fields: Any) -> dict[str, Any]:
    return {
        "id": IDS[index],
        "queue": "img",
        "name": "resize",
        "state": state,
        "max_attempts": 5,
        "created_at": NOW,
        "run_at": NOW,
    } | fields


def answer_batch(request: httpx.Request) -> httpx.Response:
    """The gateway's answer to a batch: each task stored, with its group fields echoed."""
    tasks = json.loads(request.content)["tasks"]
    created = [
        record(i, name=t["name"], group=t.get("group"), after_group=t.get("after_group"))
        for i, t in enumerate(tasks)
    ]
    return httpx.Response(201, json={"tasks": created})


@pytest.fixture
def gw() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=URL, assert_all_called=False) as router:
        router.post("/v1/queues/img/tasks/batch", name="batch").mock(side_effect=answer_batch)
        yield router


def batches(router: respx.MockRouter) -> list[list[dict[str, Any]]]:
    return [json.loads(call.request.content)["tasks"] for call in router.routes["batch"].calls]


@pytest.fixture
def client() -> Iterator[Client]:
    with Client(URL, "key", transport=httpx.HTTPTransport()) as client:
        yield client


@task("img", name="resize")
def resize(path: str, width: int = 100) -> str:
    return f"{path}@{width}"


@task("img", name="publish")
def publish(album: str) -> None:
    return None


@task("other", name="elsewhere")
def elsewhere() -> None:
    return None


def test_a_signature_checks_its_arguments_and_takes_options() -> None:
    signature = resize.s("a.png", width=200)
    assert isinstance(signature, TaskSignature)
    assert (signature.args, signature.kwargs) == (("a.png",), {"width": 200})
    assert signature.queue == "img"
    urgent = signature.set(priority=9).set(owner="me")
    assert urgent.options == {"priority": 9, "owner": "me"}
    assert signature.options == {}  # set() makes a new signature
    assert repr(signature) == "resize.s('a.png', width=200)"
    with pytest.raises(TypeError):
        resize.s("a.png", 1, 2, 3)  # type: ignore[call-arg]
    # Fits once a previous task's result is put first (a chain's link), not on its own.
    waiting = resize.s()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="previous task's result"):
        waiting.create()
    with pytest.raises(TypeError, match="previous task's result"):
        group(waiting)


def test_group_enqueues_members_and_dependent_in_one_batch(
    gw: respx.MockRouter, client: Client
) -> None:
    job = group(resize.s("a.png"), resize.s("b.png").set(priority=5)).then(publish.s("summer"))
    handle = job.apply(client)
    [sent] = batches(gw)
    assert isinstance(handle, GroupHandle)
    assert handle.name.startswith("group-")
    assert [(t["name"], t["payload"]["args"]) for t in sent] == [
        ("resize", ["a.png"]),
        ("resize", ["b.png"]),
        ("publish", ["summer"]),
    ]
    assert [t.get("group") for t in sent] == [handle.name, handle.name, None]
    assert [t.get("after_group") for t in sent] == [None, None, handle.name]
    assert sent[1]["priority"] == 5
    assert [h.id for h in handle.members] == IDS[:2]
    assert [h.id for h in handle.dependents] == [IDS[2]]
    # The handles need ids and states only: the batch asks for receipts (a gateway that
    # answers whole Tasks, as this one does, is read the same).
    assert gw.routes["batch"].calls.last.request.headers["prefer"] == "return=minimal"
    assert [h.state for h in handle.members] == [TaskState.QUEUED] * 2


def test_each_enqueue_of_a_group_gets_a_fresh_name_unless_named(
    gw: respx.MockRouter, client: Client
) -> None:
    job = group(resize.s("a.png")).then(publish.s("x"))
    first, second = job.apply(client), job.apply(client)
    assert first.name != second.name
    named = group(resize.s("a.png"), name="thumbs-7").apply(client)
    assert named.name == "thumbs-7"
    assert batches(gw)[-1][0]["group"] == "thumbs-7"


def test_delay_uses_the_first_members_client(gw: respx.MockRouter, client: Client) -> None:
    handle = group(resize.using(client).s("a.png"), resize.s("b.png")).delay()
    assert len(handle.members) == 2
    assert gw.routes["batch"].call_count == 1


def test_groups_are_checked_before_anything_is_sent(gw: respx.MockRouter) -> None:
    with pytest.raises(ValueError, match="one queue"):
        group(resize.s("a.png"), elsewhere.s())
    with pytest.raises(ValueError, match="one queue"):
        group(resize.s("a.png")).then(elsewhere.s())
    with pytest.raises(ValueError, match="at least one member"):
        group()
    with pytest.raises(ValueError, match="group name 'no spaces'"):
        group(resize.s("a.png"), name="no spaces")
    with pytest.raises(ValueError, match="sets the group"):
        group(resize.s("a.png").set(group="mine"))
    with pytest.raises(ValueError, match="sets the after_group"):
        group(resize.s("a.png")).then(publish.s("x").set(after_group="mine"))
    with pytest.raises(TypeError, match=r"my_task.s\(...\)"):
        group(resize)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at most 1000"):
        group(*[resize.s(str(i)) for i in range(1001)])
    assert not gw.routes["batch"].called


def test_results_in_member_order(gw: respx.MockRouter, client: Client) -> None:
    gw.get(f"/v1/tasks/{IDS[0]}").respond(200, json=record(0, "succeeded", result="a@100"))
    gw.get(f"/v1/tasks/{IDS[1]}").respond(200, json=record(1, "succeeded", result="b@100"))
    handle = group(resize.s("a.png"), resize.s("b.png")).apply(client)
    assert handle.results(timeout=5) == ["a@100", "b@100"]


def test_results_raise_for_a_failed_or_unfinished_member(
    gw: respx.MockRouter, client: Client
) -> None:
    gw.get(f"/v1/tasks/{IDS[0]}").respond(200, json=record(0, "succeeded", result=1))
    failed = gw.get(f"/v1/tasks/{IDS[1]}").respond(200, json=record(1, "dead", error="boom"))
    handle = group(resize.s("a.png"), resize.s("b.png")).apply(client)
    with pytest.raises(TaskFailed, match="boom"):
        handle.results(timeout=5)
    failed.respond(200, json=record(1, "running"))
    with pytest.raises(TaskTimeout):
        handle.results(timeout=0)


async def test_async_group(gw: respx.MockRouter) -> None:
    gw.get(f"/v1/tasks/{IDS[0]}").respond(200, json=record(0, "succeeded", result="a"))
    gw.get(f"/v1/tasks/{IDS[1]}").respond(200, json=record(1, "failed", error="bad"))
    async with AsyncClient(URL, "key", transport=httpx.AsyncHTTPTransport()) as client:
        job = group(resize.s("a.png"), resize.s("b.png"), name="pair").then(publish.s("p"))
        handle = await job.apply_async(client)
        assert isinstance(handle, AsyncGroupHandle)
        assert (handle.name, len(handle.members), len(handle.dependents)) == ("pair", 2, 1)
        with pytest.raises(TaskFailed, match="bad"):
            await handle.results(timeout=5)
        bound = group(resize.using(client).s("c.png"))
        assert len((await bound.delay_async()).members) == 1
    assert [t["group"] for t in batches(gw)[0][:2]] == ["pair", "pair"]
