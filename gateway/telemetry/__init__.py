"""Telemetry: the gateway's traces and metrics, on the OpenTelemetry SDK."""
