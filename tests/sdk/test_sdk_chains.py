"""``chain()`` and ``chord()``: one batch request whose later tasks depend on the earlier ones
and ask for their results; the worker side puts those results first in the call."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
import respx

from sdk import Client, chain, chord, group, task
from sdk.chains import passed_argument
from sdk.outcomes import Refusal
from sdk.wire import PushBody

from .test_sdk_groups import batches, client, gw  # noqa: F401 - fixtures


@task("img", name="add")
def add(x: int, y: int) -> int:
    return x + y


@task("img", name="total")
def total(values: list[int], label: str = "") -> int:
    return sum(values)


@task("other", name="elsewhere")
def elsewhere(x: int) -> int:
    return x


def test_a_chain_is_one_batch_each_link_after_the_last_with_its_result(
    gw: respx.MockRouter,  # noqa: F811
    client: Client,  # noqa: F811
) -> None:
    handle = chain(add.s(1, 2), add.s(10), add.s(y=5)).apply(client)
    [sent] = batches(gw)
    ids = [t["id"] for t in sent]
    assert all(ids)
    assert len(set(ids)) == 3
    assert [t.get("depends_on", []) for t in sent] == [[], [ids[0]], [ids[1]]]
    assert [t.get("pass_results", False) for t in sent] == [False, True, True]
    assert [t["payload"] for t in sent] == [
        {"args": [1, 2], "kwargs": {}},
        {"args": [10], "kwargs": {}, "results_as": "first"},
        {"args": [], "kwargs": {"y": 5}, "results_as": "first"},
    ]
    assert len(handle.tasks) == 3
    assert handle.last is handle.tasks[-1]


def test_a_chord_is_the_group_then_a_callback_on_every_member(
    gw: respx.MockRouter,  # noqa: F811
    client: Client,  # noqa: F811
) -> None:
    chord(group(add.s(1, 1), add.s(2, 2)), total.s(label="t")).apply(client)
    [sent] = batches(gw)
    members, callback = sent[:2], sent[2]
    assert {t["group"] for t in members} == {members[0]["group"]}
    assert callback["depends_on"] == [t["id"] for t in members]
    assert callback["pass_results"] is True
    assert callback["payload"] == {"args": [], "kwargs": {"label": "t"}, "results_as": "list"}


def test_a_chain_keeps_its_links_dedup_and_singleton_keys(
    gw: respx.MockRouter,  # noqa: F811
    client: Client,  # noqa: F811
) -> None:
    """The store makes a link matched by its key wait-for-able (docs/idempotency.md): the keys
    go out as given, beside the chain's own depends_on."""
    first = add.s(1, 2).set(dedup_key="order-7")
    chain(first, add.s(10).set(singleton_key="sum")).apply(client)
    [sent] = batches(gw)
    assert [(t.get("dedup_key"), t.get("singleton_key")) for t in sent] == [
        ("order-7", None),
        (None, "sum"),
    ]
    assert sent[1]["depends_on"] == [sent[0]["id"]]


def test_chains_refuse_what_cannot_work() -> None:
    with pytest.raises(TypeError):
        add.s(10).delay()  # needs a previous result
    with pytest.raises(ValueError, match="one queue"):
        chain(add.s(1, 2), elsewhere.s())
    with pytest.raises(TypeError):
        chain(add.s(1, 2), add.s(1, 2)).create()  # the second does not take a result
    with pytest.raises(ValueError, match="at most 100"):
        chord(group(*(add.s(i, i) for i in range(101))), total.s())


def push(results: list[dict[str, Any]] | None) -> PushBody:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    return PushBody.model_validate(
        {
            "id": "t",
            "queue": "q",
            "name": "n",
            "attempt": 1,
            "lease_expires_at": now,
            "deadline": now,
            "results": results,
        }
    )


def test_the_worker_puts_the_results_first() -> None:
    body = push([{"id": "a", "result": 3}, {"id": "b", "result": 4}])
    assert passed_argument(body, "first") == 3
    assert passed_argument(body, "list") == [3, 4]
    truncated = passed_argument(push([{"id": "a", "truncated": True}]), "list")
    assert isinstance(truncated, Refusal)
    assert truncated.status == 422
    assert "task a" in (truncated.detail or "")
    assert isinstance(passed_argument(push(None), "first"), Refusal)
