"""Telemetry of the SDK, on the OpenTelemetry API alone: the application chooses the SDK and
exporters (or none, and this costs next to nothing)."""
