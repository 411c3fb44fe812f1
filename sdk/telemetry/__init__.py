"""Telemetry of the SDK, on the OpenTelemetry API alone: traces (:mod:`sdk.telemetry.tracing`)
and worker metrics (:mod:`sdk.telemetry.metrics`) go to whatever tracer and meter providers the
application configured, and cost next to nothing when it configured none. Never an exporter:
how the numbers leave the process is the application's choice."""
