"""Telemetry of the SDK, on the OpenTelemetry API alone: traces (:mod:`sdk.telemetry.tracing`,
whose OpenTelemetry calls are in :mod:`sdk.telemetry.spans`) and worker metrics
(:mod:`sdk.telemetry.metrics`, chosen by :mod:`sdk.telemetry.recorder`) go to whatever tracer
and meter providers the application configured, and cost next to nothing when it configured
none. OpenTelemetry is imported only once the application has imported it (an optional
dependency: the ``otel`` extra of ``jobgate-sdk``). Never an exporter: how the numbers leave the
process is the application's choice."""
