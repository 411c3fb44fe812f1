"""The gateway's spans in process (an in-memory exporter): request spans, enqueue spans, and the
trace context each task stores; and no tracing machinery at all when export is off."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from redis.asyncio import Redis

from gateway.app import create_app
from gateway.settings import ApiKey, Settings
from gateway.store.keys import QueueKeys
from gateway.telemetry.server_spans import ServerSpans
from gateway.telemetry.tracing import Tracing
from tests.support import gateway_client

ADMIN = "tracing-admin-key-0123456789"
PRODUCER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@dataclass
class Traced:
    api: httpx.AsyncClient
    spans: InMemorySpanExporter
    redis: Redis

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans.get_finished_spans() if s.name == name]

    async def stored(self, queue: str, task_id: str) -> dict[str, Any]:
        raw = await self.redis.hget(QueueKeys.of(queue).meta, task_id)
        assert raw is not None
        return dict(json.loads(raw))


@pytest.fixture
async def traced(redis_url: str) -> AsyncIterator[Traced]:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    settings = Settings(redis_url=redis_url, api_keys=[ApiKey(key=ADMIN, scopes=["admin"])])
    async with (
        gateway_client(settings, ADMIN, Tracing(provider)) as api,
        Redis.from_url(redis_url, decode_responses=True) as redis,
    ):
        assert (await api.put("/v1/queues/q", json={})).status_code == 201
        yield Traced(api, spans, redis)


def _hex(span: ReadableSpan) -> tuple[str, str]:
    context = span.get_span_context()
    return f"{context.trace_id:032x}", f"{context.span_id:016x}"


def _parent(span: ReadableSpan) -> str | None:
    return None if span.parent is None else f"{span.parent.span_id:016x}"


async def test_enqueue_span_is_the_child_of_the_request_span_under_the_callers(
    traced: Traced,
) -> None:
    r = await traced.api.post(
        "/v1/queues/q/tasks", json={"name": "job"}, headers={"traceparent": PRODUCER}
    )
    task_id = r.json()["id"]
    (request,) = traced.named("POST /v1/queues/{queue}/tasks")
    (enqueue,) = traced.named("send q")
    assert request.kind is SpanKind.SERVER
    assert enqueue.kind is SpanKind.PRODUCER
    assert _parent(request) == "b7ad6b7169203331"
    assert _hex(request)[0] == "0af7651916cd43dd8448eb211c80319c"
    assert _parent(enqueue) == _hex(request)[1]
    attributes = dict(enqueue.attributes or {})
    assert attributes["messaging.operation.type"] == "send"
    assert attributes["messaging.destination.name"] == "q"
    assert attributes["messaging.message.id"] == task_id
    trace_id, span_id = _hex(enqueue)
    assert (await traced.stored("q", task_id))["tp"].split("-")[1:3] == [trace_id, span_id]


async def test_a_batch_shares_one_enqueue_span_and_a_tasks_own_context_gets_its_own(
    traced: Traced,
) -> None:
    own = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    r = await traced.api.post(
        "/v1/queues/q/tasks/batch",
        json={
            "tasks": [
                {"name": "a", "traceparent": own, "tracestate": "vendor=x"},
                {"name": "b"},
                {"name": "c"},
            ]
        },
        headers={"traceparent": PRODUCER},
    )
    assert r.status_code == 201, r.text
    first, second, third = (t["id"] for t in r.json()["tasks"])
    (create,) = traced.named("create q")
    (send,) = traced.named("send q")
    (request,) = traced.named("POST /v1/queues/{queue}/tasks/batch")
    assert dict(create.attributes or {})["messaging.message.id"] == first
    assert _hex(create)[0] == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert _parent(create) == "00f067aa0ba902b7"
    assert _parent(send) == _hex(request)[1]
    assert _hex(send)[0] == "0af7651916cd43dd8448eb211c80319c"
    attributes = dict(send.attributes or {})
    assert attributes["messaging.batch.message_count"] == 2
    assert "messaging.message.id" not in attributes
    stored = await traced.stored("q", first)
    assert stored["ts"] == "vendor=x"
    assert stored["tp"].split("-")[2] == _hex(create)[1]
    for task_id in (second, third):
        assert (await traced.stored("q", task_id))["tp"].split("-")[2] == _hex(send)[1]


async def test_callback_spans_name_the_task_and_settle(traced: Traced) -> None:
    r = await traced.api.post(
        "/v1/callbacks/q/01J00000000000000000000000/result",
        json={"result": 1},
        headers={"jobgate-lease": "stale", "traceparent": PRODUCER},
    )
    assert r.status_code == 404
    (span,) = traced.named("POST /v1/callbacks/{queue}/{task_id}/result")
    attributes = dict(span.attributes or {})
    assert attributes["messaging.operation.type"] == "settle"
    assert attributes["messaging.message.id"] == "01J00000000000000000000000"
    assert attributes["http.response.status_code"] == 404
    assert _parent(span) == "b7ad6b7169203331"


async def test_a_request_that_sampling_left_out_makes_no_span_and_passes_its_context_on(
    traced: Traced,
) -> None:
    unsampled = PRODUCER[:-2] + "00"
    r = await traced.api.post(
        "/v1/queues/q/tasks", json={"name": "job"}, headers={"traceparent": unsampled}
    )
    own = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
    r2 = await traced.api.post("/v1/queues/q/tasks", json={"name": "job", "traceparent": own})
    assert traced.named("POST /v1/queues/{queue}/tasks") != []  # the second request's own
    assert traced.named("send q") == []
    assert (await traced.stored("q", r.json()["id"]))["tp"] == unsampled
    assert (await traced.stored("q", r2.json()["id"]))["tp"] == own


def test_no_tracing_machinery_when_export_is_off() -> None:
    app = create_app(Settings(), Tracing.off())
    assert not any(m.cls is ServerSpans for m in app.user_middleware)


async def test_a_task_shows_its_trace_id(traced: Traced) -> None:
    r = await traced.api.post("/v1/queues/q/tasks", json={"name": "job"})
    (enqueue,) = traced.named("send q")
    assert r.json()["trace_id"] == _hex(enqueue)[0]
    r = await traced.api.get(f"/v1/tasks/{r.json()['id']}")
    assert r.json()["trace_id"] == _hex(enqueue)[0]
