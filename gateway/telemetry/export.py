"""Where the gateway's metrics go: Prometheus text on ``GET /metrics``, and OTLP when asked.

:func:`metrics_export` builds one meter provider per app (never the process-wide one, so two
apps in a process share nothing), with:

- a Prometheus reader on a registry of its own, which ``GET /metrics`` renders (OpenTelemetry's
  exporter names them the Prometheus way: counters end in ``_total``, histograms in ms in
  ``_milliseconds``);
- an OTLP HTTP/protobuf exporter, pushed every ``OTEL_METRIC_EXPORT_INTERVAL`` ms (60 s by
  default), when ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`` is
  set; the other standard variables (headers, timeout, certificate, compression) apply as the
  exporter reads them. ``OTEL_METRICS_EXPORTER=none`` turns it off.

Each gateway process exports its own numbers, with ``service.instance.id`` telling them apart;
docs/observability.md says how to add them up across gateways.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass

from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

SERVICE_NAME = "jobgate-gateway"
METER_NAME = "jobgate"
PROMETHEUS_CONTENT_TYPE = CONTENT_TYPE_LATEST

OTLP_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")


@dataclass(frozen=True)
class MetricsExport:
    """An app's meter provider, and the Prometheus registry ``/metrics`` renders (None: the
    provider has no Prometheus reader, and ``/metrics`` answers 404)."""

    provider: MeterProvider
    registry: CollectorRegistry | None = None

    def render(self) -> bytes | None:
        """The Prometheus text of every metric now (the collection runs the gauges'
        callbacks: refresh them first)."""
        return None if self.registry is None else generate_latest(self.registry)


def otlp_wanted(environ: Mapping[str, str]) -> bool:
    """Whether the standard variables ask for OTLP metrics."""
    if "none" in environ.get("OTEL_METRICS_EXPORTER", "").split(","):
        return False
    return any(environ.get(name) for name in OTLP_ENDPOINTS)


def metrics_export(environ: Mapping[str, str] | None = None) -> MetricsExport:
    """A provider exporting to Prometheus text, and to OTLP when the environment asks."""
    environ = os.environ if environ is None else environ
    registry = CollectorRegistry(auto_describe=True)
    readers: list[MetricReader] = [
        PrometheusMetricReader(registry=registry, scope_info_enabled=False)
    ]
    if otlp_wanted(environ):
        readers.append(PeriodicExportingMetricReader(OTLPMetricExporter()))
    resource = Resource.create(
        {
            "service.name": environ.get("OTEL_SERVICE_NAME") or SERVICE_NAME,
            "service.instance.id": f"{socket.gethostname()}:{os.getpid()}",
        }
    )
    return MetricsExport(MeterProvider(metric_readers=readers, resource=resource), registry)
