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

This module does not import OpenTelemetry: until the application has imported its trace API
(:func:`otel_in_use`) there can be no current span and no tracer provider, so there is nothing
to send or record. From then on the calls go to :mod:`sdk.telemetry.spans`, imported then. So
the OpenTelemetry API is an optional dependency of the SDK (the ``otel`` extra of
``jobgate-sdk``), and a program that does not trace never loads it.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

from sdk.wire import HEADER_TRACEPARENT, HEADER_TRACESTATE, PushBody

if TYPE_CHECKING:
    from opentelemetry.trace import Span

__all__ = ["ProcessSpan", "current_headers", "otel_in_use", "trace_headers"]

_OTEL_TRACE: Final = "opentelemetry.trace"


def otel_in_use() -> bool:
    """Whether the application has imported OpenTelemetry's trace API (a dict lookup). Every
    way to make a span current or set a tracer provider goes through that module."""
    return _OTEL_TRACE in sys.modules


def current_headers() -> dict[str, str]:
    """The W3C headers of the current span; empty when there is none."""
    if not otel_in_use():
        return {}
    from sdk.telemetry import spans

    return spans.current_headers()


def trace_headers(traceparent: str | None, tracestate: str | None) -> dict[str, str]:
    """The W3C headers of a context given as fields (a batch push's items)."""
    if not traceparent:
        return {}
    headers = {HEADER_TRACEPARENT: traceparent}
    if tracestate:
        headers[HEADER_TRACESTATE] = tracestate
    return headers


class ProcessSpan:
    """The span of one attempt on the worker, from the task function's start to its end.

    Without a tracer provider there is no span: the callbacks carry the push's context as it
    came, and nothing else is done (a no-op span would cost tens of microseconds a task)."""

    __slots__ = ("headers", "span")

    def __init__(self, push: PushBody, incoming: Mapping[str, str]) -> None:
        self.span: Span | None = None
        self.headers: dict[str, str] = dict(incoming)
        """What the attempt's callbacks carry: this span's context, or the push's."""
        if not otel_in_use():
            return
        from sdk.telemetry import spans

        if not spans.tracing():
            return
        self.span = spans.start_process_span(push, incoming)
        self.headers = spans.span_headers(self.span)

    @contextmanager
    def current(self) -> Iterator[None]:
        """Make the span current while the function's task or thread is started (both copy
        the current context), so spans the function makes are its children."""
        if self.span is None:
            yield
            return
        from sdk.telemetry import spans

        with spans.use(self.span):
            yield

    def end(self, run: asyncio.Future[Any]) -> None:
        """End the span with the function's outcome (an exception marks it failed)."""
        if self.span is None:
            return
        from sdk.telemetry import spans

        spans.end(self.span, run)
