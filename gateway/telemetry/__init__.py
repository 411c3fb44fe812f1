"""OpenTelemetry for the gateway: traces and metrics, made by the app factory and handed to the
parts that record.

Nothing here is created at import time. Traces: :mod:`gateway.telemetry.tracing` builds the
tracer provider from the ``OTEL_*`` variables (off unless they name an exporter) and
:mod:`gateway.telemetry.server_spans` is the HTTP server span middleware. Metrics: the app
factory builds a meter provider (or takes the one a test hands in), and the dispatcher, services
and recoverer call a small typed recorder (:mod:`gateway.telemetry.metrics`) instead of touching
OpenTelemetry objects, so the hot path stays readable and turning metrics off costs nothing.
:mod:`gateway.telemetry.export` sets up the readers (Prometheus text for ``GET /metrics``, OTLP
when ``OTEL_EXPORTER_OTLP_*`` asks); :mod:`gateway.telemetry.labels` keeps attributes bounded;
:mod:`gateway.telemetry.gauges` reads queue depths and pushes in flight from Redis once per
collection. See docs/observability.md.

Imports caches, settings and store; imported by api, services, dispatch, background and the app
factory.
"""
