"""Trace context for the SDK: producers pass theirs on, workers continue the task's trace.

Only the OpenTelemetry *API* is used: spans are recorded and exported when the application has
set a tracer provider (``opentelemetry.trace.set_tracer_provider``), and are no-ops otherwise.
Either way the W3C context travels, so a gateway that traces sees the producer's span as the
parent of the enqueue, and a worker that does not trace still sends its callbacks with the
push's context (the gateway's callback spans then sit under the push span).

- :func:`current_headers`: the ``traceparent``/``tracestate`` of the current span, sent on
  every API request of :class:`~sdk.Client` and :class:`~sdk.AsyncClient` (none without a span).
- :class:`ProcessSpan`: the ``CONSUMER`` span ``process <queue>`` around one attempt of a task
  function on the worker, child of the context the push carried; the function runs with it as
  the current span (so its own spans nest under it), and its callbacks carry its context.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from sdk.wire import HEADER_TRACEPARENT, HEADER_TRACESTATE, PushBody

__all__ = ["TRACER_NAME", "ProcessSpan", "current_headers", "trace_headers"]

TRACER_NAME: Final = "jobgate.sdk"
SYSTEM: Final = "jobgate"
_PROPAGATOR: Final = TraceContextTextMapPropagator()  # stateless


def current_headers() -> dict[str, str]:
    """The W3C headers of the current span; empty when there is none."""
    headers: dict[str, str] = {}
    _PROPAGATOR.inject(headers)
    return headers


def trace_headers(traceparent: str | None, tracestate: str | None) -> dict[str, str]:
    """The W3C headers of a context given as fields (a batch push's items)."""
    if not traceparent:
        return {}
    headers = {HEADER_TRACEPARENT: traceparent}
    if tracestate:
        headers[HEADER_TRACESTATE] = tracestate
    return headers


def _parent(incoming: Mapping[str, str]) -> Context:
    """The push's context, or the current span when it is in the same trace (the host app's
    own HTTP instrumentation read the push's headers already: its span is the better parent)."""
    extracted = _PROPAGATOR.extract(incoming)
    pushed = trace.get_current_span(extracted).get_span_context()
    current = trace.get_current_span().get_span_context()
    if current.is_valid and (not pushed.is_valid or current.trace_id == pushed.trace_id):
        return trace.set_span_in_context(trace.get_current_span())
    return extracted


_RECHECK_S = 1.0


class _ProviderCheck:
    """Whether the application set a tracer provider (else every span would be a no-op).

    Asking OpenTelemetry costs an environment lookup per call while none is set (about 4 % of
    the worker's CPU per push), so the answer is kept: a provider, once set, is set for good
    (OpenTelemetry refuses a second one); "none" is asked again at most once a second, so a
    provider set after the worker started is seen within a second."""

    def __init__(self) -> None:
        self._getter: object = None
        self._found = False
        self._checked = -_RECHECK_S

    def __call__(self) -> bool:
        getter = trace.get_tracer_provider
        now = time.monotonic()
        if getter is self._getter and (self._found or now - self._checked < _RECHECK_S):
            return self._found
        provider = getter()
        self._getter, self._checked = getter, now
        self._found = not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)
        return self._found


_tracing = _ProviderCheck()


class ProcessSpan:
    """The span of one attempt on the worker, from the task function's start to its end.

    Without a tracer provider there is no span: the callbacks carry the push's context as it
    came, and nothing else is done (a no-op span would cost tens of microseconds a task)."""

    __slots__ = ("headers", "span")

    def __init__(self, push: PushBody, incoming: Mapping[str, str]) -> None:
        self.span: trace.Span | None = None
        self.headers: dict[str, str] = dict(incoming)
        """What the attempt's callbacks carry: this span's context, or the push's."""
        if not _tracing():
            return
        tracer = trace.get_tracer(TRACER_NAME)
        self.span = tracer.start_span(
            f"process {push.queue}",
            context=_parent(incoming),
            kind=SpanKind.CONSUMER,
            attributes={
                "messaging.system": SYSTEM,
                "messaging.operation.type": "process",
                "messaging.operation.name": "process",
                "messaging.destination.name": push.queue,
                "messaging.message.id": push.id,
                "jobgate.task.name": push.name,
                "jobgate.attempt": push.attempt,
            },
        )
        self.headers = {}
        _PROPAGATOR.inject(self.headers, context=trace.set_span_in_context(self.span))

    @contextmanager
    def current(self) -> Iterator[None]:
        """Make the span current while the function's task or thread is started (both copy
        the current context), so spans the function makes are its children."""
        if self.span is None:
            yield
            return
        with trace.use_span(self.span, end_on_exit=False, record_exception=False):
            yield

    def end(self, run: asyncio.Future[Any]) -> None:
        """End the span with the function's outcome (an exception marks it failed)."""
        if self.span is None:
            return
        if run.cancelled():
            self.span.set_status(Status(StatusCode.ERROR, "cancelled"))
        elif (error := run.exception()) is not None:
            self.span.record_exception(error)
            self.span.set_attribute("error.type", type(error).__qualname__)
            self.span.set_status(Status(StatusCode.ERROR, str(error) or type(error).__name__))
        self.span.end()
