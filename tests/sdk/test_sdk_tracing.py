"""Trace context in the SDK: the worker continues the push's trace and its callbacks carry it;
the client sends the caller's span. No tracer provider is set in this process, so these are the
no-op paths, where the context must still pass through, except where a test hands one in."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sdk import AsyncClient, Client, task
from tests.sdk.fakes import FakeGateway, MakeWorker, Serve, webhook_headers

PUSHED = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"  # what fakes.py pushes


async def test_without_a_tracer_provider_callbacks_carry_the_pushs_context(
    make_worker: MakeWorker, serve: Serve, gateway: FakeGateway
) -> None:
    @task("default", name="plain")
    async def plain() -> str:
        return "ok"

    @task("default", name="plain_sync")
    def plain_sync() -> str:
        return "ok"

    worker = make_worker([plain, plain_sync], inline_window=0, heartbeat_interval=60)
    async with serve(worker) as push:
        assert (await push("plain")).status_code == 202
        assert (await push("plain_sync")).status_code == 202
        results = await gateway.wait_for("result", count=2)
    assert [r.traceparent for r in results] == [PUSHED, PUSHED]


async def test_with_a_tracer_provider_the_task_runs_in_its_process_span(
    make_worker: MakeWorker,
    serve: Serve,
    gateway: FakeGateway,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    # As trace.set_tracer_provider would, but for this test alone (that one is once a process).
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    seen: list[trace.SpanContext] = []

    @task("default", name="traced_sync")
    def traced_sync() -> str:
        seen.append(trace.get_current_span().get_span_context())
        raise ValueError("boom")

    worker = make_worker([traced_sync], inline_window=0, heartbeat_interval=60)
    async with serve(worker) as push:
        assert (await push("traced_sync")).status_code == 202
        (error,) = await gateway.wait_for("error")
    (process,) = spans.get_finished_spans()
    context = process.get_span_context()
    assert process.name == "process default"
    assert process.kind is trace.SpanKind.CONSUMER
    assert process.parent is not None
    assert f"{process.parent.span_id:016x}" == PUSHED.split("-")[2]
    assert f"{context.trace_id:032x}" == PUSHED.split("-")[1]
    assert seen == [context]  # the function ran in it (in its thread)
    assert error.traceparent is not None
    assert error.traceparent.split("-")[2] == f"{context.span_id:016x}"
    assert process.status.status_code is trace.StatusCode.ERROR
    assert dict(process.attributes or {})["error.type"] == "ValueError"


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


def test_the_provider_check_keeps_its_answer_and_asks_again_while_none_is_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sdk.telemetry import spans

    asked: list[int] = []
    clock = [100.0]
    current: list[trace.TracerProvider] = [trace.ProxyTracerProvider()]

    def provider() -> trace.TracerProvider:
        asked.append(1)
        return current[0]

    monkeypatch.setattr(trace, "get_tracer_provider", provider)
    monkeypatch.setattr(spans.time, "monotonic", lambda: clock[0])
    check = spans._ProviderCheck()

    assert check() is False
    assert check() is False
    assert len(asked) == 1  # "none" is kept for a second
    current[0] = TracerProvider()
    clock[0] += 0.5
    assert check() is False
    clock[0] += 0.6
    assert check() is True  # seen once the second has passed
    clock[0] += 3600
    assert check() is True
    assert len(asked) == 2  # a provider, once found, is never asked for again


async def test_coalesced_enqueues_each_carry_their_callers_span() -> None:
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        tasks = json.loads(request.content)["tasks"]
        return httpx.Response(201, json={"tasks": [task_json(i) for i in range(len(tasks))]})

    provider = TracerProvider()
    transport = httpx.MockTransport(answer)
    async with AsyncClient("http://gateway", "key", transport=transport, linger=0.05) as client:

        async def traced() -> str:
            with provider.get_tracer("producer").start_as_current_span("produce") as span:
                await client.enqueue("q", "n", 1)
            context = span.get_span_context()
            return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"

        parent, _ = await asyncio.gather(traced(), client.enqueue("q", "n", 2))
    (request,) = sent
    assert request.url.path == "/v1/queues/q/tasks/batch"
    assert "traceparent" not in request.headers  # no one caller's span for the whole batch
    members = json.loads(request.content)["tasks"]
    assert [m.get("traceparent") for m in members] == [parent, None]


def task_json(index: int) -> dict[str, object]:
    return {
        "id": f"01J0000000000000000000000{index}",
        "queue": "q",
        "name": "n",
        "state": "queued",
        "max_attempts": 5,
        "created_at": "2030-01-01T00:00:00Z",
        "run_at": "2030-01-01T00:00:00Z",
    }
