"""``ctx.call``: the first attempt ends with the call callback's body; a later one returns the
answer, or raises CallFailed (docs/durable.md, "A durable HTTP call")."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from sdk.context import AsyncContext, Context, DetachedChannel, TaskInfo
from sdk.errors import CallFailed, CallOut
from sdk.outcomes import failure

URL = "https://api.example.com/charges"


def info(steps: dict[str, object] | None = None) -> TaskInfo:
    return TaskInfo(id="01J0000000000000000000000A", name="pay", queue="q", steps=steps or {})


def ctx(steps: dict[str, object] | None = None) -> Context:
    return Context(info(steps), DetachedChannel())


def test_the_first_attempt_ends_with_the_call() -> None:
    with pytest.raises(CallOut) as raised:
        ctx().call("charge", URL, json={"amount": 3}, headers={"X-A": "b"}, timeout=30)
    body = raised.value.call
    assert (body.step, body.url, body.method, body.timeout) == ("charge", URL, "POST", 30)
    assert (body.json_body, body.headers) == ({"amount": 3}, {"X-A": "b"})
    assert body.model_dump(mode="json", exclude_none=True)["json"] == {"amount": 3}
    verdict = failure(raised.value)
    assert verdict is not None
    assert verdict.wait is body


def test_the_method_is_get_without_a_body_and_as_given_otherwise() -> None:
    with pytest.raises(CallOut) as get:
        ctx().call("a", URL, timeout=timedelta(minutes=2))
    assert (get.value.call.method, get.value.call.timeout) == ("GET", 120)
    with pytest.raises(CallOut) as put:
        ctx().call("b", URL, method="put", body="text")
    assert (put.value.call.method, put.value.call.body) == ("PUT", "text")


def test_the_async_context_ends_the_attempt_likewise() -> None:
    async def go() -> None:
        await AsyncContext(info(), DetachedChannel()).call("c", URL)

    with pytest.raises(CallOut):
        asyncio.run(go())


def test_a_request_the_gateway_would_refuse_raises_in_the_task() -> None:
    with pytest.raises(ValueError, match="must be an http"):
        ctx().call("a", "ftp://x")
    with pytest.raises(ValueError, match="Host"):
        ctx().call("a", URL, headers={"Host": "x"})
    with pytest.raises(ValueError, match="timeout"):
        ctx().call("a", URL, timeout=901)


def test_a_recorded_answer_is_returned_whatever_its_status() -> None:
    answer = {"status": 503, "headers": {"retry-after": "1"}, "body": "busy"}
    assert ctx({"charge": answer}).call("charge", URL, json={}) == answer


@pytest.mark.parametrize("kind", ["refused", "unreachable", "timed_out", "too_large", "redirects"])
def test_a_recorded_failure_raises_call_failed(kind: str) -> None:
    recorded = {"charge": {"error": "boom", "kind": kind}}
    with pytest.raises(CallFailed) as raised:
        ctx(recorded).call("charge", URL)
    assert (raised.value.step, raised.value.kind, raised.value.error) == ("charge", kind, "boom")
