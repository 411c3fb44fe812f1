"""The end-to-end worker (``tests.e2e.worker_app``) with tracing on, as an application would
turn it on: it sets a tracer provider that exports over OTLP (``OTEL_EXPORTER_OTLP_ENDPOINT``).
The SDK itself uses only the OpenTelemetry API; the provider and exporter are the app's.

Run as ``uvicorn tests.e2e.traced_worker_app:app``.
"""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

provider = TracerProvider(resource=Resource.create({"service.name": "e2e-worker"}))
provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter()))
trace.set_tracer_provider(provider)

from tests.e2e.worker_app import app  # noqa: E402 - after the provider, as an app would

__all__ = ["app"]
