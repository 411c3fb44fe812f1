"""``ctx.step`` and ``ctx.sleep`` in both contexts, on a recording channel: a step runs once and
is recorded before it returns, a recorded one replays without running, a name is used once per
attempt, a sleep records itself then raises ``Sleep`` until its time has passed, and a step that
would not fit before a known time limit hands the task over."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import JsonValue

from sdk.context import AsyncContext, Context, DetachedChannel, TaskInfo, TimeBudget
from sdk.errors import DuplicateStep, HandOver, Sleep, WaitForEvent
from sdk.outcomes import failure
from sdk.runner import Runner
from sdk.wire import PushBody, WaitIn
from tests.sdk.fakes import push_body


def info(**steps: JsonValue) -> TaskInfo:
    return TaskInfo("t1", "job", "q", attempt=2, steps=steps)


class Calls:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self, value: Any) -> Any:
        self.n += 1
        return value


async def test_an_async_step_runs_once_and_is_recorded_before_it_returns() -> None:
    channel = DetachedChannel()
    ctx = AsyncContext(info(), channel)
    calls = Calls()

    async def charge(amount: int) -> tuple[int, str]:
        assert channel.steps == {}  # not recorded before it ran
        return calls(amount), "ok"

    assert await ctx.step("charge", charge, 5) == [5, "ok"]  # its JSON form
    assert channel.steps == {"charge": [5, "ok"]}
    assert calls.n == 1


async def test_a_recorded_step_replays_without_running() -> None:
    channel = DetachedChannel()
    ctx = AsyncContext(info(charge={"id": 7}), channel)
    calls = Calls()
    assert await ctx.step("charge", calls, {"id": 8}) == {"id": 7}
    assert (calls.n, channel.steps) == (0, {})


async def test_a_name_is_used_once_per_attempt_and_step_name_numbers_loops() -> None:
    ctx = AsyncContext(info(), DetachedChannel())
    await ctx.step("a", Calls(), 1)
    with pytest.raises(DuplicateStep, match="'a' is used twice"):
        await ctx.step("a", Calls(), 2)
    assert [ctx.step_name("page") for _ in range(3)] == ["page#1", "page#2", "page#3"]
    assert ctx.step_name("row") == "row#1"


def test_the_sync_context_steps_in_its_thread() -> None:
    channel = DetachedChannel()
    ctx = Context(info(done=1), channel)
    calls = Calls()
    assert ctx.step("done", calls, 2) == 1
    assert ctx.step("new", calls, 3) == 3
    assert (calls.n, channel.steps) == (1, {"new": 3})
    with pytest.raises(DuplicateStep):
        ctx.step("new", calls, 3)


async def test_a_sleep_records_itself_then_raises_until_its_time() -> None:
    channel = DetachedChannel()
    ctx = AsyncContext(info(), channel)
    with pytest.raises(Sleep) as slept:
        await ctx.sleep("nap", timedelta(hours=2))
    wake = slept.value.until
    assert timedelta(hours=1.9) < wake - datetime.now(UTC) <= timedelta(hours=2)
    assert channel.steps == {"nap": {"until": wake.isoformat()}}
    verdict = failure(slept.value)
    assert verdict is not None
    assert verdict.sleep_until == wake


async def test_a_recorded_sleep_is_done_once_past_and_resumes_if_woken_early() -> None:
    past = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
    ctx = AsyncContext(info(nap={"until": past}), DetachedChannel())
    await ctx.sleep("nap", timedelta(hours=2))  # done: returns at once
    ahead = datetime.now(UTC) + timedelta(hours=1)
    channel = DetachedChannel()
    early = AsyncContext(info(nap={"until": ahead.isoformat()}), channel)
    with pytest.raises(Sleep) as slept:
        await early.sleep_until("nap", ahead + timedelta(hours=5))
    assert slept.value.until == ahead  # the recorded time, not a new one
    assert channel.steps == {}


def test_the_sync_sleep_needs_an_aware_time() -> None:
    ctx = Context(info(), DetachedChannel())
    with pytest.raises(ValueError, match="aware"):
        ctx.sleep_until("nap", datetime(2030, 1, 1))
    with pytest.raises(Sleep):
        ctx.sleep("nap2", timedelta(seconds=5))


def test_a_detached_sync_step_needs_no_event_loop() -> None:
    assert Context(info(), DetachedChannel()).step("x", lambda: {"a": 1}) == {"a": 1}


async def test_a_step_that_would_not_fit_before_the_time_limit_hands_the_task_over() -> None:
    channel = DetachedChannel()
    past = TimeBudget(time.monotonic() - 1, margin=0.0)  # no time left at all
    ctx = AsyncContext(info(done=1), channel, budget=past)
    calls = Calls()
    assert await ctx.step("done", calls, 2) == 1  # a replay runs nothing: never handed over
    assert await ctx.step("first", calls, 3) == 3  # the first step run here always runs
    with pytest.raises(HandOver) as handed:
        await ctx.step("second", calls, 4)
    assert (calls.n, channel.steps) == (1, {"first": 3})
    assert handed.value.left < 0 <= handed.value.needed
    verdict = failure(handed.value)  # a sleep with no delay: pushed again at once, no attempt
    assert verdict is not None
    assert verdict.sleep_until is not None
    assert verdict.sleep_until <= datetime.now(UTC)
    assert (ctx.time_left or 0) < 0


def test_steps_run_while_the_longest_one_plus_the_margin_fits() -> None:
    channel = DetachedChannel()
    budget = TimeBudget(time.monotonic() + 0.5, margin=0.2)
    ctx = Context(info(), channel, budget=budget)
    nap = 0.1  # so each step takes at least this: 0.1 + 0.2 fits in the 0.5 s once, not twice
    ctx.step("a", time.sleep, nap)

    def more() -> None:
        for n in range(5):
            ctx.step(f"b{n}", time.sleep, nap)

    with pytest.raises(HandOver):
        more()
    assert list(channel.steps) in (["a"], ["a", "b0"])
    assert Context(info(), DetachedChannel()).time_left is None  # no limit known: none applies


def test_the_workers_time_limit_the_invocations_end_and_the_deadline_bound_an_attempt() -> None:
    runner = Runner([], time_limit=60, time_limit_margin=0.5)

    def ending_in(seconds: float) -> PushBody:
        deadline = datetime.now(UTC) + timedelta(seconds=seconds)
        return PushBody.model_validate(push_body("x", deadline=deadline.isoformat()))

    near, far = ending_in(10), ending_in(3600)
    assert [round(b.left()) if b else None for b in map(runner._budget, (near, far))] == [10, 60]
    runner.invocation_ends = time.monotonic() + 5  # a Lambda invocation with 5 s left
    budget = runner._budget(far)
    assert budget is not None
    assert (round(budget.left()), budget.margin) == (5, 0.5)
    assert Runner([])._budget(far) is None  # no limit known: no budget, no hand-over
    with pytest.raises(ValueError, match="time_limit"):
        Runner([], time_limit=0)


async def test_a_wait_for_an_event_ends_the_attempt_with_its_callback_body() -> None:
    channel = DetachedChannel()
    ctx = AsyncContext(info(), channel)
    with pytest.raises(WaitForEvent) as waiting:
        await ctx.wait_for_event(
            "approval",
            event="invoice.approved",
            match={"invoice": "inv-7"},
            timeout=timedelta(days=2),
            lookback=30,
        )
    assert waiting.value.wait == WaitIn(
        step="approval",
        event="invoice.approved",
        match={"invoice": "inv-7"},
        timeout=172_800,
        lookback=30,
    )
    assert channel.steps == {}  # the gateway records the step, with the event or null
    verdict = failure(waiting.value)
    assert verdict is not None
    assert (verdict.status, verdict.wait, verdict.sleep_until) == (202, waiting.value.wait, None)


def test_a_recorded_wait_returns_its_event_or_none_on_the_next_attempt() -> None:
    event = {"id": "ev1", "name": "invoice.approved", "data": {"invoice": "inv-7"}}
    ctx = Context(info(approval=event, other=None), DetachedChannel())
    assert ctx.wait_for_event("approval", event="invoice.approved", timeout=60) == event
    assert ctx.wait_for_event("other", event="invoice.approved", timeout=60) is None  # timed out
    with pytest.raises(DuplicateStep):
        ctx.wait_for_event("approval", event="invoice.approved", timeout=60)
    with pytest.raises(WaitForEvent):
        ctx.wait_for_event("third", event="x", timeout=1)
