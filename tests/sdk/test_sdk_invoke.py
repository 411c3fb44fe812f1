"""``ctx.invoke``: the first attempt ends with the invoke callback's body; a later one returns
the child's result, or raises ChildFailed (docs/durable.md, "Invoking a task")."""

from __future__ import annotations

import pytest

from sdk.context import Context, DetachedChannel, TaskInfo
from sdk.errors import ChildFailed, InvokeChild
from sdk.outcomes import failure


def ctx(steps: dict[str, object] | None = None) -> Context:
    info = TaskInfo(id="01J0000000000000000000000A", name="parent", queue="q", steps=steps or {})
    return Context(info, DetachedChannel())


def test_the_first_attempt_ends_with_the_invoke() -> None:
    with pytest.raises(InvokeChild) as raised:
        ctx().invoke("kid", "add", 1, 2, queue="math", timeout=30, label="x")
    body = raised.value.invoke
    assert (body.step, body.queue, body.name, body.timeout) == ("kid", "math", "add", 30)
    assert body.payload == {"args": [1, 2], "kwargs": {"label": "x"}}
    verdict = failure(raised.value)
    assert verdict is not None
    assert verdict.wait is body


def test_a_recorded_success_returns_the_result() -> None:
    recorded = {"kid": {"state": "succeeded", "id": "c", "result": {"sum": 3}}}
    assert ctx(recorded).invoke("kid", "add", 1, 2) == {"sum": 3}


@pytest.mark.parametrize("state", ["failed", "dead", "cancelled", "timed_out", "refused"])
def test_a_recorded_failure_raises_child_failed(state: str) -> None:
    recorded = {"kid": {"state": state, "id": "c", "error": "boom"}}
    with pytest.raises(ChildFailed) as raised:
        ctx(recorded).invoke("kid", "add")
    assert (raised.value.state, raised.value.child_id, raised.value.error) == (state, "c", "boom")
