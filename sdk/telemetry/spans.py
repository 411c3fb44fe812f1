"""The OpenTelemetry calls behind :mod:`sdk.telemetry.tracing`: the W3C propagator, the check
for a tracer provider, and the ``process <queue>`` span of one attempt.

Imported only once the application has imported OpenTelemetry's trace API itself (see
:func:`sdk.telemetry.tracing.otel_in_use`): before that no span can be current and no provider
set, so there is nothing to propagate or record, and the SDK does not pay for the import.
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

from sdk.wire import PushBody

__all__ = [
    "TRACER_NAME",
    "current_headers",
    "end",
    "span_headers",
    "start_process_span",
    "tracing",
    "use",
]

TRACER_NAME: Final = "jobgate.sdk"
SYSTEM: Final = "jobgate"
_PROPAGATOR: Final = TraceContextTextMapPropagator()  # stateless


def current_headers() -> dict[str, str]:
    """The W3C headers of the current span; empty when there is none."""
    headers: dict[str, str] = {}
    _PROPAGATOR.inject(headers)
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


tracing = _ProviderCheck()


def start_process_span(push: PushBody, incoming: Mapping[str, str]) -> trace.Span:
    """The ``CONSUMER`` span ``process <queue>`` of one attempt, child of :func:`_parent`."""
    tracer = trace.get_tracer(TRACER_NAME)
    return tracer.start_span(
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


def span_headers(span: trace.Span) -> dict[str, str]:
    """The W3C headers of ``span``'s context."""
    headers: dict[str, str] = {}
    _PROPAGATOR.inject(headers, context=trace.set_span_in_context(span))
    return headers


@contextmanager
def use(span: trace.Span) -> Iterator[None]:
    """``span`` is the current span inside."""
    with trace.use_span(span, end_on_exit=False, record_exception=False):
        yield


def end(span: trace.Span, run: asyncio.Future[Any]) -> None:
    """End ``span`` with the function's outcome (an exception marks it failed)."""
    if run.cancelled():
        span.set_status(Status(StatusCode.ERROR, "cancelled"))
    elif (error := run.exception()) is not None:
        span.record_exception(error)
        span.set_attribute("error.type", type(error).__qualname__)
        span.set_status(Status(StatusCode.ERROR, str(error) or type(error).__name__))
    span.end()
