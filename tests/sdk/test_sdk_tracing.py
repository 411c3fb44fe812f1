"""Trace context in the SDK: the worker continues the push's trace and its callbacks carry it;
the client sends the caller's span. No tracer provider is set in this process: these are the
no-op paths, where the context must still pass through."""

from __future__ import annotations

import json

import httpx
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from sdk import Client, task
from tests.sdk.fakes import FakeGateway, MakeWorker, Serve, webhook_headers

PUSHED = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"  # what fakes.py pushes


async def test_callbacks_carry_the_pushs_trace_context_and_the_task_runs_in_it(
    make_worker: MakeWorker, serve: Serve, gateway: FakeGateway
) -> None:
    seen: list[str] = []

    @task("default", name="traced")
    async def traced() -> str:
        seen.append(f"{trace.get_current_span().get_span_context().trace_id:032x}")
        return "ok"

    @task("default", name="traced_sync")
    def traced_sync() -> str:
        seen.append(f"{trace.get_current_span().get_span_context().trace_id:032x}")
        return "ok"

    worker = make_worker([traced, traced_sync], inline_window=0, heartbeat_interval=60)
    async with serve(worker) as push:
        assert (await push("traced")).status_code == 202
        assert (await push("traced_sync")).status_code == 202
        results = await gateway.wait_for("result", count=2)
    assert [r.traceparent for r in results] == [PUSHED, PUSHED]
    assert seen == ["0af7651916cd43dd8448eb211c80319c"] * 2


async def test_batch_items_carry_their_own_trace_context(
    make_worker: MakeWorker, serve: Serve, gateway: FakeGateway
) -> None:
    @task("default", name="quick", inline=False)
    async def quick(n: int) -> int:
        return n

    first = "00-11111111111111111111111111111111-2222222222222222-01"
    async with serve(make_worker([quick])) as push:
        answer = await push.batch(
            push.item("quick", {"args": [1]}, traceparent=first),
            push.item("quick", {"args": [2]}),
        )
        assert answer.status_code == 200
        results = await gateway.wait_for("result", count=2)
    by_result = {r.body["result"]: r.traceparent for r in results}
    assert by_result == {1: first, 2: None}


def test_the_client_sends_the_callers_span_as_traceparent() -> None:
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json={"items": []})

    provider = TracerProvider()  # not the global one: the context is what travels
    with Client("http://gateway", "key", transport=httpx.MockTransport(answer)) as client:
        client.list_queues()
        with provider.get_tracer("producer").start_as_current_span("produce") as span:
            client.list_queues()
    context = span.get_span_context()
    assert "traceparent" not in sent[0].headers
    ids = f"{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"
    assert sent[1].headers["traceparent"] == f"00-{ids}"


def test_fakes_push_the_traceparent_these_tests_expect() -> None:
    assert webhook_headers("x", json.dumps({}).encode())["traceparent"] == PUSHED
