"""OpenTelemetry for workers, on the OpenTelemetry API alone: it records into whatever meter
provider the application configured, and does nothing when it configured none. Never an
exporter: how the numbers leave the process is the application's choice."""
