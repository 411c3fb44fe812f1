"""Tracing's configuration (which variables turn export on) and its small pure parts."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from gateway.store.endpoint_records import EndpointRecord
from gateway.store.records import Lease
from gateway.telemetry.tracing import (
    TraceHeaders,
    Tracing,
    carrier,
    context_headers,
    exporter_names,
)

TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.mark.parametrize(
    ("environ", "names"),
    [
        ({}, []),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, ["otlp"]),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, ["otlp"]),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, ["otlp"]),
        ({"OTEL_TRACES_EXPORTER": "console, otlp"}, ["console", "otlp"]),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}, []),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, []),
    ],
)
def test_export_is_on_only_when_the_environment_names_an_exporter(
    environ: dict[str, str], names: list[str]
) -> None:
    assert exporter_names(environ) == names


def test_off_by_default_and_on_with_an_otlp_endpoint() -> None:
    assert not Tracing.from_env({}).enabled
    tracing = Tracing.from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    try:
        assert tracing.enabled
        assert tracing.provider is not None
        assert tracing.provider.resource.attributes["service.name"] == "jobgate-gateway"
    finally:
        tracing.shutdown()


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, None),
        ({"traceparent": TP}, TraceHeaders(TP, None)),
        ({"traceparent": TP, "tracestate": "a=1,b=2"}, TraceHeaders(TP, "a=1,b=2")),
        ({"traceparent": TP, "tracestate": "bad\nstate"}, TraceHeaders(TP, None)),
        ({"traceparent": TP.upper()}, None),
        ({"traceparent": TP + "-extra"}, None),
        ({"traceparent": "garbage", "tracestate": "a=1"}, None),
    ],
)
def test_a_requests_trace_headers_are_checked(
    headers: dict[str, str], expected: TraceHeaders | None
) -> None:
    assert TraceHeaders.of(headers) == expected


def test_carrier_of_a_stored_context() -> None:
    assert carrier(None, "a=1") == {}
    assert carrier(TP, None) == {"traceparent": TP}
    assert carrier(TP, "a=1") == {"traceparent": TP, "tracestate": "a=1"}


def _lease(task_id: str, traceparent: str | None) -> Lease:
    return Lease(
        queue="q",
        task_id=task_id,
        endpoint_id="ep1",
        token="t",
        name="job",
        attempt=2,
        max_attempts=None,
        payload_json="null",
        checkpoint_json=None,
        expires_ms=0,
        deadline_ms=0,
        traceparent=traceparent,
    )


ENDPOINT = EndpointRecord(
    id="ep1",
    queue="q",
    url="https://user:secret@worker.example:8443/run?token=x",
    concurrency=1,
    capabilities=[],
    secrets=["whsec_x"],
    created_ms=0,
)


def test_a_push_span_is_the_tasks_child_and_goes_in_the_headers() -> None:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracing = Tracing(provider)
    headers = {"traceparent": TP, "tracestate": "old=1"}
    with tracing.push([_lease("T1", TP)], ENDPOINT, headers) as span:
        span.answered(503, None)
    (push,) = spans.get_finished_spans()
    context = push.get_span_context()
    assert push.name == "push q"
    assert push.parent is not None
    assert f"{push.parent.span_id:016x}" == "b7ad6b7169203331"
    assert f"{context.trace_id:032x}" == "0af7651916cd43dd8448eb211c80319c"
    assert headers["traceparent"].split("-")[2] == f"{context.span_id:016x}"
    assert "tracestate" not in headers  # the stored one went with the replaced traceparent
    attributes = dict(push.attributes or {})
    assert attributes["url.full"] == "https://worker.example:8443/run"  # no credentials, no query
    assert (attributes["server.address"], attributes["server.port"]) == ("worker.example", 8443)
    assert (attributes["messaging.message.id"], attributes["jobgate.attempt"]) == ("T1", 2)
    assert attributes["http.response.status_code"] == 503
    assert push.status.status_code is StatusCode.ERROR


def test_a_batch_push_span_links_each_tasks_context() -> None:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    headers: dict[str, str] = {}
    with Tracing(provider).push([_lease("T1", TP), _lease("T2", None)], ENDPOINT, headers) as s:
        s.answered(None, "TimeoutError: no answer")
    (push,) = spans.get_finished_spans()
    assert push.parent is None
    assert [f"{link.context.span_id:016x}" for link in push.links] == ["b7ad6b7169203331"]
    assert dict(push.attributes or {})["messaging.batch.message_count"] == 2
    assert dict(push.attributes or {})["error.type"] == "TimeoutError"
    assert headers == {}  # each item carries its own context instead


def test_context_headers_are_what_the_w3c_propagator_writes() -> None:
    provider = TracerProvider()
    propagator = TraceContextTextMapPropagator()
    for incoming in ({"traceparent": TP}, {"traceparent": TP, "tracestate": "a=1,b=2"}, {}):
        span = provider.get_tracer("t").start_span("s", context=propagator.extract(incoming))
        expected: dict[str, str] = {}
        propagator.inject(expected, context=trace.set_span_in_context(span))
        assert context_headers(span) == expected
    assert context_headers(trace.INVALID_SPAN) == {}


def test_spans_under_an_unsampled_parent_are_skipped_only_with_a_parent_based_sampler() -> None:
    unsampled = TP[:-2] + "00"
    parent_based = Tracing(TracerProvider())  # the default sampler: parentbased_always_on
    assert parent_based.follows(TP)
    assert parent_based.follows(None)  # a root: the sampler decides
    assert not parent_based.follows(unsampled)
    assert parent_based.follows(TP[:-2] + "03")  # sampled, with other flags set
    assert Tracing(TracerProvider(sampler=ALWAYS_ON)).follows(unsampled)
    assert not Tracing.off().follows(TP)
