"""The callback channel on its own: final callbacks retried, bounded, shielded; lease fencing."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from sdk.attempt import MIN_HEARTBEAT_INTERVAL, Attempt
from sdk.callbacks import CallbackChannel
from sdk.errors import ApiError, LeaseLost
from sdk.sessions import HttpxSession
from sdk.tasks import task
from sdk.wire import ErrorIn, PushBody, ResultIn

BASE = "http://gateway.test/v1/callbacks/T1/"
EXPIRES = datetime(2030, 1, 1, tzinfo=UTC)


def channel_with(
    answers: list[httpx.Response | Exception], expires: datetime = EXPIRES
) -> tuple[CallbackChannel, list[httpx.Request]]:
    """A channel answered by ``answers`` in turn, whose retries (final callbacks, and those the
    task waits for) come at once; the requests it sent."""
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    http = HttpxSession(httpx.MockTransport(handle))
    channel = CallbackChannel(
        http, BASE, "L1", expires, final_retry_delays=(0, 0, 0), call_retry_delays=(0,)
    )
    return channel, seen


async def test_final_callback_retries_connection_errors_and_5xx() -> None:
    channel, seen = channel_with(
        [
            httpx.ConnectError("refused"),
            httpx.Response(502),
            httpx.Response(200, json={"state": "succeeded"}),
        ]
    )
    assert await channel.finish(ResultIn(result={"n": 1})) is True
    assert len(seen) == 3
    assert str(seen[0].url) == BASE.rstrip("/") + "/result"
    assert seen[0].headers["jobgate-lease"] == "L1"
    assert json.loads(seen[-1].content) == {"result": {"n": 1}}


async def test_final_callback_gives_up_after_the_last_delay() -> None:
    channel, seen = channel_with([httpx.ConnectError("refused")] * 4)
    assert await channel.finish(ErrorIn(error="boom")) is False
    assert len(seen) == 4
    assert str(seen[0].url).endswith("/error")


async def test_final_callback_refused_with_4xx_is_not_retried() -> None:
    channel, seen = channel_with([httpx.Response(422, json={"title": "bad", "status": 422})])
    assert await channel.finish(ResultIn(result=1)) is False
    assert len(seen) == 1


async def test_final_callback_survives_cancellation_of_its_caller() -> None:
    gate = asyncio.Event()
    delivered = asyncio.Event()

    async def handle(request: httpx.Request) -> httpx.Response:
        await gate.wait()
        delivered.set()
        return httpx.Response(200, json={"state": "succeeded"})

    http = HttpxSession(httpx.MockTransport(handle))
    channel = CallbackChannel(http, BASE, "L1", EXPIRES)
    sender = asyncio.create_task(channel.finish(ResultIn(result=1)))
    await asyncio.sleep(0)  # let it start sending
    sender.cancel()
    with pytest.raises(asyncio.CancelledError):
        await sender
    gate.set()
    await asyncio.wait_for(delivered.wait(), 5)


async def test_409_marks_the_lease_lost_and_nothing_more_is_sent() -> None:
    channel, seen = channel_with([httpx.Response(409, json={"title": "stale", "status": 409})])
    with pytest.raises(LeaseLost):
        await channel.heartbeat(0.5)
    assert channel.lost
    with pytest.raises(LeaseLost):
        await channel.log("after", "info")
    assert len(seen) == 1


async def test_heartbeat_reads_cancel_and_moves_the_lease() -> None:
    later = EXPIRES + timedelta(seconds=30)
    answer = {"cancel_requested": True, "lease_expires_at": later.isoformat()}
    refusal = httpx.Response(400, json={"title": "Bad request", "status": 400})
    channel, seen = channel_with([httpx.Response(200, json=answer), refusal])
    assert await channel.heartbeat(0.25) is True
    assert channel.lease_expires_at == later
    assert json.loads(seen[0].content) == {"progress": 0.25}
    with pytest.raises(ApiError):  # a refusal; a 5xx is sent again (below)
        await channel.heartbeat(None)


async def test_default_heartbeat_interval_is_a_third_of_the_lease_left() -> None:
    @task("default", name="noop")
    def noop() -> None:
        return None

    now = datetime(2030, 1, 1, tzinfo=UTC)
    push = PushBody(
        id="01J0000000000000000000000A",
        queue="default",
        name="noop",
        attempt=1,
        lease_expires_at=now + timedelta(seconds=30),
        deadline=now + timedelta(hours=1),
    )
    channel, _ = channel_with([])
    channel.lease_expires_at = push.lease_expires_at
    assert Attempt(noop, push, channel, clock=lambda: now)._interval() == pytest.approx(10.0)
    assert Attempt(noop, push, channel, 2.5, clock=lambda: now)._interval() == 2.5
    late = now + timedelta(minutes=5)
    assert Attempt(noop, push, channel, clock=lambda: late)._interval() == MIN_HEARTBEAT_INTERVAL


UNAVAILABLE = httpx.Response(
    503, json={"title": "Service unavailable", "status": 503}, headers={"retry-after": "1"}
)


async def test_a_heartbeat_the_gateway_cannot_answer_yet_is_sent_again() -> None:
    later = (datetime.now(UTC) + timedelta(seconds=30)).isoformat()
    channel, seen = channel_with(
        [
            UNAVAILABLE,  # its Redis restarting
            httpx.ConnectError("refused"),  # the gateway itself restarting
            httpx.Response(200, json={"cancel_requested": False, "lease_expires_at": later}),
        ]
    )
    assert await channel.heartbeat(0.5) is False
    assert len(seen) == 3
    assert all(json.loads(request.content) == {"progress": 0.5} for request in seen)
    assert channel.lease_expires_at == datetime.fromisoformat(later)


async def test_a_step_is_recorded_through_a_gateway_restart() -> None:
    channel, seen = channel_with(
        [
            httpx.RemoteProtocolError("closed"),
            UNAVAILABLE,
            httpx.Response(200, json={"recorded": True, "attempt": 1}),
        ]
    )
    assert await channel.step("charge", {"ok": True}) is False  # no cancel requested
    assert [str(request.url).rsplit("/", 1)[1] for request in seen] == ["step"] * 3


async def test_checkpoint_and_logs_are_sent_again_too() -> None:
    channel, seen = channel_with([UNAVAILABLE, httpx.Response(200, json={})] * 2)
    await channel.checkpoint({"page": 3})
    await channel.log("hello", "info")
    assert [str(request.url).rsplit("/", 1)[1] for request in seen] == [
        "checkpoint",
        "checkpoint",
        "logs",
        "logs",
    ]


async def test_no_callback_is_retried_past_the_lease() -> None:
    expired = datetime.now(UTC) - timedelta(seconds=1)
    channel, seen = channel_with([UNAVAILABLE], expires=expired)
    with pytest.raises(ApiError) as refused:
        await channel.step("charge", 1)
    assert refused.value.status == 503
    assert len(seen) == 1


async def test_a_refusal_is_not_retried() -> None:
    channel, seen = channel_with([httpx.Response(422, json={"title": "bad", "status": 422})])
    with pytest.raises(ApiError):
        await channel.checkpoint({"x": 1})
    assert len(seen) == 1
    stale, seen = channel_with([httpx.Response(409, json={"title": "Stale lease", "status": 409})])
    with pytest.raises(LeaseLost):
        await stale.heartbeat(None)
    assert len(seen) == 1
