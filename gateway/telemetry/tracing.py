"""The gateway's traces, on the OpenTelemetry SDK: one trace per task, from its enqueue through
each push to the worker's callbacks.

The app factory makes one :class:`Tracing` from the environment (:meth:`Tracing.from_env`) and
hands it to whatever records spans; nothing is set globally, so two apps in one process do not
share a tracer provider. Export is on only when an exporter is configured with the standard
variables (``OTEL_TRACES_EXPORTER``, or an ``OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT``); then spans
go over OTLP (HTTP/protobuf) through a batch processor, sampled by ``OTEL_TRACES_SAMPLER``.

Off, :attr:`Tracing.enabled` is False and every caller takes its untraced path: no span object,
no context, no header string is made per request or per push. What a task carries (the
traceparent and tracestate stored with it) is still passed on in its pushes, so a worker that
traces continues the producer's trace through a gateway that does not.

The spans (attribute names from OpenTelemetry's semantic conventions for messaging and HTTP):

- every API request: an HTTP ``SERVER`` span whose parent is the request's ``traceparent``
  (:mod:`gateway.telemetry.server_spans`); on worker callbacks it also names the task;
- every enqueue: a ``PRODUCER`` span ``send <queue>`` (one for a whole batch), child of the
  request's span; a task that brought its own context (``traceparent`` field) gets its own
  span under that instead. The span's context is what the task stores, so everything after it
  joins it;
- every push: a ``CLIENT`` span ``push <queue>``, child of the task's stored context, whose
  context travels in the push's ``traceparent`` header: the worker's span is its child. A batch
  push is one span linked to each task's context, and each item carries its task's own context.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Final
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SpanExporter,
)
from opentelemetry.sdk.trace.sampling import ParentBased
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from gateway.store.endpoint_records import EndpointRecord
from gateway.store.records import Lease, NewTask
from sdk.wire import HEADER_TRACEPARENT, HEADER_TRACESTATE, TRACEPARENT_PATTERN

log = logging.getLogger(__name__)

SYSTEM: Final = "jobgate"  # messaging.system
SERVICE_NAME: Final = "jobgate-gateway"  # the default service.name (OTEL_SERVICE_NAME wins)
PROPAGATOR: Final = TraceContextTextMapPropagator()  # stateless: W3C traceparent/tracestate
_TRACEPARENT: Final = re.compile(TRACEPARENT_PATTERN)

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
PROTOCOL_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")


def exporter_names(environ: Mapping[str, str]) -> list[str]:
    """The span exporters the environment asks for: ``OTEL_TRACES_EXPORTER`` when set (``none``
    turns tracing off), else ``otlp`` when an OTLP endpoint is set, else none. (The
    specification's default is ``otlp``; here nothing is exported unless asked, so an
    unconfigured gateway neither pays for spans nor sends to a collector that is not there.)"""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    asked = environ.get("OTEL_TRACES_EXPORTER", "")
    names = [n.strip().lower() for n in asked.split(",") if n.strip()]
    if not names and any(environ.get(v) for v in ENDPOINT_VARIABLES):
        names = ["otlp"]
    return [] if "none" in names else names


def _exporter(name: str, environ: Mapping[str, str]) -> SpanExporter | None:
    if name == "console":
        return ConsoleSpanExporter()
    if name != "otlp":
        log.warning("OTEL_TRACES_EXPORTER=%s is not supported (otlp, console, none)", name)
        return None
    protocol = next((environ[v] for v in PROTOCOL_VARIABLES if environ.get(v)), "http/protobuf")
    if protocol != "http/protobuf":
        log.warning("OTLP protocol %r is not supported: traces go over http/protobuf", protocol)
    # Imported here: the exporter pulls in protobuf and requests, which a gateway that does not
    # export never needs to load.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()  # endpoint, headers, timeout, compression: OTEL_EXPORTER_OTLP_*


@dataclass(frozen=True, slots=True)
class TraceHeaders:
    """The W3C trace context a request came with, checked: a malformed ``traceparent`` is
    ignored, as the W3C specification says (and ``tracestate`` with it)."""

    traceparent: str
    tracestate: str | None

    @classmethod
    def of(cls, headers: Mapping[str, str]) -> TraceHeaders | None:
        traceparent = headers.get(HEADER_TRACEPARENT)
        if traceparent is None or not _TRACEPARENT.fullmatch(traceparent):
            return None
        tracestate = headers.get(HEADER_TRACESTATE)
        if tracestate is not None and (len(tracestate) > 512 or not tracestate.isprintable()):
            tracestate = None
        return cls(traceparent, tracestate or None)


def carrier(traceparent: str | None, tracestate: str | None) -> dict[str, str]:
    """The W3C headers of a stored trace context (none when there is no traceparent)."""
    if not traceparent:
        return {}
    if tracestate:
        return {HEADER_TRACEPARENT: traceparent, HEADER_TRACESTATE: tracestate}
    return {HEADER_TRACEPARENT: traceparent}


class Tracing:
    """Where the gateway's spans go: a tracer provider with an exporter, or nowhere."""

    def __init__(self, provider: TracerProvider | None = None) -> None:
        self.provider = provider
        self.enabled = provider is not None
        self._tracer = trace.NoOpTracer() if provider is None else provider.get_tracer("jobgate")
        # A parent-based sampler (the default, and every parentbased_* of OTEL_TRACES_SAMPLER)
        # records no child of an unsampled parent: such spans can be skipped without asking it.
        self._follows_parent = provider is not None and isinstance(provider.sampler, ParentBased)

    def follows(self, traceparent: str | None) -> bool:
        """Whether a span under this stored or received context could be recorded: False for
        an unsampled parent under a parent-based sampler, so the callers skip the span (and
        pass the context on as it is) for the tasks that sampling left out."""
        if not self.enabled:
            return False
        if not self._follows_parent or traceparent is None:
            return True
        return int(traceparent[-2:], 16) & 1 == 1  # the sampled flag (checked: hex)

    @classmethod
    def off(cls) -> Tracing:
        return cls(None)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> Tracing:
        """A provider exporting as the ``OTEL_*`` variables say, or :meth:`off` when they name
        no exporter. The sampler is the SDK's reading of ``OTEL_TRACES_SAMPLER`` (default:
        ``parentbased_always_on``); ``OTEL_BSP_*`` tune the batch processor."""
        exporters = [e for n in exporter_names(environ) if (e := _exporter(n, environ))]
        if not exporters:
            return cls.off()
        named = {} if environ.get("OTEL_SERVICE_NAME") else {"service.name": SERVICE_NAME}
        provider = TracerProvider(resource=Resource.create(named))
        for exporter in exporters:
            provider.add_span_processor(BatchSpanProcessor(exporter))
        return cls(provider)

    def shutdown(self) -> None:
        """Export the spans still buffered, then stop (the app's lifespan end)."""
        if self.provider is not None:
            self.provider.shutdown()

    def start_span(
        self,
        name: str,
        kind: SpanKind,
        attributes: dict[str, str | int],
        parent: Context | None = None,
        links: Sequence[Link] = (),
    ) -> Span:
        return self._tracer.start_span(
            name, context=parent, kind=kind, attributes=attributes, links=links
        )

    # --- enqueue ----------------------------------------------------------------------------

    @contextmanager
    def enqueue(
        self, queue: str, tasks: Sequence[NewTask], *, batch: bool
    ) -> Iterator[list[NewTask]]:
        """``PRODUCER`` spans around storing the tasks; yields the tasks with the trace context
        each is to store: its span's.

        The tasks that came without a context of their own share one ``send <queue>`` span,
        child of the current one (the request's span): a batch is one span, not one per task
        (``messaging.batch.message_count``; ``messaging.message.id`` when it holds one task),
        which keeps a traced batch enqueue cheap. A task that brought its own context (its
        ``traceparent`` field) gets its own span under it: ``send``, or ``create`` in a batch.
        Under a parent that sampling left out no span is made, and the tasks keep that
        parent's context as it is."""
        spans: list[Span] = []
        traced: list[NewTask] = []
        shared: dict[str, str] | None = None  # the context of the tasks without their own
        current = trace.get_current_span()
        if self._follows_parent and not current.get_span_context().trace_flags.sampled:
            shared = context_headers(current) or None  # unsampled: passed on as it is
        for task in tasks:
            if task.traceparent:
                if not self.follows(task.traceparent):
                    traced.append(task)  # no span would be recorded: keep its context
                    continue
                parent = PROPAGATOR.extract(carrier(task.traceparent, task.tracestate))
                span = self._enqueue_span("create" if batch else "send", queue, [task], parent)
                spans.append(span)
                traced.append(_with_context(task, context_headers(span)))
                continue
            if shared is None:
                own = [t for t in tasks if not t.traceparent]
                span = self._enqueue_span("send", queue, own, None)
                spans.append(span)
                shared = context_headers(span)
            traced.append(_with_context(task, shared))
        try:
            yield traced
        except BaseException as e:
            for span in spans:
                _failed(span, e)
            raise
        finally:
            for span in spans:
                span.end()

    def _enqueue_span(
        self, operation: str, queue: str, tasks: Sequence[NewTask], parent: Context | None
    ) -> Span:
        attributes: dict[str, str | int] = {
            "messaging.system": SYSTEM,
            "messaging.operation.type": operation,
            "messaging.operation.name": "enqueue",
            "messaging.destination.name": queue,
        }
        if len(tasks) == 1:
            attributes["messaging.message.id"] = tasks[0].id
            attributes["jobgate.task.name"] = tasks[0].name
        else:
            attributes["messaging.batch.message_count"] = len(tasks)
        return self.start_span(f"{operation} {queue}", SpanKind.PRODUCER, attributes, parent)

    # --- pushes -----------------------------------------------------------------------------

    @contextmanager
    def push(
        self, leases: Sequence[Lease], endpoint: EndpointRecord, headers: dict[str, str]
    ) -> Iterator[PushSpan]:
        """A ``CLIENT`` span around one push (of one task, or a batch); its context replaces the
        ``traceparent``/``tracestate`` in ``headers``. A push cut off (its lease ran out, the
        gateway stops) ends the span as an error."""
        first = leases[0]
        url = urlsplit(endpoint.url)
        attributes: dict[str, str | int] = {
            "messaging.system": SYSTEM,
            "messaging.operation.type": "send",
            "messaging.operation.name": "push",
            "messaging.destination.name": first.queue,
            "http.request.method": "POST",
            "url.full": f"{url.scheme}://{url.netloc.rpartition('@')[2]}{url.path}",
            "server.address": url.hostname or "",
            "server.port": url.port or (443 if url.scheme == "https" else 80),
            "jobgate.endpoint.id": endpoint.id,
        }
        if len(leases) == 1:
            # Never the current context: a dispatcher loop started during a request inherited
            # that request's.
            parent = _stored_context(first) or Context()
            links: list[Link] = []
            attributes |= {
                "messaging.message.id": first.task_id,
                "jobgate.task.name": first.name,
                "jobgate.attempt": first.attempt,
            }
        else:
            parent = Context()  # a root: the batch's tasks belong to many traces
            links = [
                Link(trace.get_current_span(c).get_span_context())
                for lease in leases
                if (c := _stored_context(lease)) is not None
            ]
            attributes["messaging.batch.message_count"] = len(leases)
        span = self.start_span(f"push {first.queue}", SpanKind.CLIENT, attributes, parent, links)
        if len(leases) == 1:
            headers.pop(HEADER_TRACESTATE, None)
            headers.update(context_headers(span))
        try:
            yield PushSpan(span)
        except BaseException as e:
            _failed(span, e)
            raise
        finally:
            span.end()


class PushSpan:
    """Records the answer of a push on its span."""

    __slots__ = ("span",)

    def __init__(self, span: Span) -> None:
        self.span = span

    def answered(self, status: int | None, failure: str | None) -> None:
        if status is not None:
            self.span.set_attribute("http.response.status_code", status)
            if status >= 500:
                self.span.set_attribute("error.type", str(status))
                self.span.set_status(Status(StatusCode.ERROR))
            return
        reason = failure or "no answer"
        self.span.set_attribute("error.type", reason.partition(":")[0])
        self.span.set_status(Status(StatusCode.ERROR, reason))


def context_headers(span: Span) -> dict[str, str]:
    """The W3C headers naming ``span`` as the parent (what the propagator's ``inject`` writes,
    formatted directly: this runs once per task enqueued and per push)."""
    context = span.get_span_context()
    if not context.is_valid:
        return {}
    headers = {
        HEADER_TRACEPARENT: f"00-{context.trace_id:032x}-{context.span_id:016x}-"
        f"{context.trace_flags:02x}"
    }
    if context.trace_state:
        headers[HEADER_TRACESTATE] = context.trace_state.to_header()
    return headers


def _with_context(task: NewTask, headers: Mapping[str, str]) -> NewTask:
    return replace(
        task,
        traceparent=headers.get(HEADER_TRACEPARENT),
        tracestate=headers.get(HEADER_TRACESTATE),
    )


def _stored_context(lease: Lease) -> Context | None:
    if not lease.traceparent:
        return None
    return PROPAGATOR.extract(carrier(lease.traceparent, lease.tracestate))


def _failed(span: Span, error: BaseException) -> None:
    span.set_attribute("error.type", type(error).__qualname__)
    span.set_status(Status(StatusCode.ERROR, str(error) or type(error).__name__))
