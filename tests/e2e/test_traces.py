"""Traces across processes: a producer (this process), a gateway and an SDK worker, the latter
two exporting over OTLP to an in-process collector stub (``tests.otlp_stub``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sdk import TaskState
from tests.otlp_stub import OtlpStub, ReceivedSpan, ancestors, otlp_stub
from tests.support import free_port

from .conftest import ADMIN, Cluster

pytestmark = pytest.mark.e2e

SLOW = "tests.e2e.worker_app.slow"
EXPORT_FAST = {"OTEL_BSP_SCHEDULE_DELAY": "50"}  # ms between the batch processor's exports


@pytest.fixture
def stub() -> Iterator[OtlpStub]:
    with otlp_stub() as found:
        yield found


def test_gateway_exports_spans_over_otlp_and_honours_traceparent(
    cluster: Cluster, stub: OtlpStub
) -> None:
    gateway = cluster.gateway(OTEL_EXPORTER_OTLP_ENDPOINT=stub.url, **EXPORT_FAST)
    trace_id, parent_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    r = httpx.put(
        f"{gateway}/v1/queues/traced",
        json={},
        headers={
            "authorization": f"Bearer {ADMIN}",
            "traceparent": f"00-{trace_id}-{parent_id}-01",
        },
    )
    assert r.status_code in (200, 201), r.text

    def put_span(spans: list[ReceivedSpan]) -> ReceivedSpan | None:
        return next((s for s in spans if s.name == "PUT /v1/queues/{queue}"), None)

    span = stub.wait_for(put_span, what="the PUT request's server span")
    assert (span.service, span.kind) == ("jobgate-gateway", "SERVER")
    assert (span.trace_id, span.parent_id) == (trace_id, parent_id)
    assert span.attributes["http.request.method"] == "PUT"
    assert span.attributes["http.route"] == "/v1/queues/{queue}"
    assert span.attributes["http.response.status_code"] == r.status_code
    assert httpx.get(f"{gateway}/readyz").status_code == 200  # probes are not traced
    assert not any(s.name.endswith("/readyz") for s in stub.spans)


def test_one_trace_from_the_producer_through_the_gateway_to_the_worker_and_its_callbacks(
    cluster: Cluster, stub: OtlpStub, tmp_path: Path
) -> None:
    gateway = cluster.gateway(OTEL_EXPORTER_OTLP_ENDPOINT=stub.url, **EXPORT_FAST)
    client = cluster.client(gateway)
    client.put_queue("e2e")
    port = free_port()
    endpoint = client.add_endpoint("e2e", f"http://127.0.0.1:{port}/", concurrency=8)
    cluster.worker(
        endpoint.secret,
        port,
        tmp_path / "pushes.jsonl",
        app="tests.e2e.traced_worker_app:app",
        OTEL_EXPORTER_OTLP_ENDPOINT=stub.url,
    )
    producer = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(producer))
    with provider.get_tracer("producer").start_as_current_span("produce") as produce:
        task = client.enqueue("e2e", SLOW, {"args": [0.1]})
    done = client.wait(task.id, timeout=30)
    assert done.state is TaskState.SUCCEEDED
    root = produce.get_span_context()
    trace_id, root_id = f"{root.trace_id:032x}", f"{root.span_id:016x}"

    def callback(kind: str) -> str:
        return f"POST /v1/callbacks/{{queue}}/{{task_id}}/{kind}"

    wanted = {
        "send e2e",
        "push e2e",
        "process e2e",
        *map(callback, ("checkpoint", "logs", "result")),
    }

    def complete(spans: list[ReceivedSpan]) -> list[ReceivedSpan] | None:
        ours = [s for s in spans if s.trace_id == trace_id]
        return ours if wanted <= {s.name for s in ours} else None

    spans = stub.wait_for(complete, what=f"spans {sorted(wanted)}")

    def one(name: str) -> ReceivedSpan:
        (found,) = [s for s in spans if s.name == name]
        return found

    def chain(span: ReceivedSpan) -> list[str]:
        """The names of the span's ancestors; checks the chain ends at the producer's span."""
        found = ancestors(span, spans)
        assert (found[-1] if found else span).parent_id == root_id, [s.name for s in found]
        return [s.name for s in found]

    enqueue, push, process = one("send e2e"), one("push e2e"), one("process e2e")
    assert (enqueue.kind, push.kind, process.kind) == ("PRODUCER", "CLIENT", "CONSUMER")
    assert chain(enqueue) == ["POST /v1/queues/{queue}/tasks"]
    assert chain(push) == ["send e2e", "POST /v1/queues/{queue}/tasks"]
    assert chain(process) == ["push e2e", "send e2e", "POST /v1/queues/{queue}/tasks"]
    assert (process.service, push.service) == ("e2e-worker", "jobgate-gateway")
    for span in (enqueue, push, process):
        assert span.attributes["messaging.system"] == "jobgate"
        assert span.attributes["messaging.destination.name"] == "e2e"
        assert span.attributes["messaging.message.id"] == task.id
    assert enqueue.attributes["messaging.operation.type"] == "send"
    assert push.attributes["messaging.operation.type"] == "send"
    assert push.attributes["http.response.status_code"] == 202
    assert process.attributes["messaging.operation.type"] == "process"
    for kind in ("checkpoint", "logs", "result"):
        span = one(callback(kind))
        assert span.kind == "SERVER"
        assert chain(span)[:2] == ["process e2e", "push e2e"]
        assert span.attributes["messaging.message.id"] == task.id
    assert one(callback("result")).attributes["messaging.operation.type"] == "settle"
    heartbeats = [s for s in spans if s.name == callback("heartbeat")]
    assert heartbeats, "the worker's heartbeats are in the trace"
    assert all(chain(s)[0] == "process e2e" for s in heartbeats)
