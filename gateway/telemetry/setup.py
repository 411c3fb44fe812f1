"""Putting the gateway's metrics together for one app: the recorder the hot paths call, the
queue gauges, and the page ``GET /metrics`` serves. The app factory calls
:func:`set_up_metrics` in its lifespan and :meth:`MetricsSetup.close` at its end."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass

from redis.asyncio import Redis

from gateway.caches.directory import Directory
from gateway.settings import Settings
from gateway.store.gauges import GaugeStore
from gateway.telemetry.export import METER_NAME, MetricsExport, metrics_export
from gateway.telemetry.gauges import QueueGauges
from gateway.telemetry.labels import TaskLabels
from gateway.telemetry.metrics import GatewayMetrics, Metrics
from sdk.wire import MetricsGranularity

log = logging.getLogger(__name__)


class PrometheusPage:
    """What ``GET /metrics`` answers: the gauges read afresh, then every metric rendered."""

    def __init__(self, export: MetricsExport, gauges: QueueGauges) -> None:
        self._export = export
        self._gauges = gauges

    async def text(self) -> bytes | None:
        """The Prometheus text, or None when this app exports no Prometheus format."""
        if self._export.registry is None:
            return None
        try:
            await self._gauges.refresh()
        except Exception as e:  # Redis down: the counters still render, the gauges do not
            log.warning("reading queue gauges for /metrics failed: %s", e)
        return self._export.render()


@dataclass
class MetricsSetup:
    recorder: Metrics
    page: PrometheusPage | None = None
    gauges: QueueGauges | None = None
    owned: MetricsExport | None = None  # built here, so shut down here

    async def close(self) -> None:
        """Stop reading gauges, then flush and stop the exporters this setup built (OTLP
        sends what is left), off the event loop: an export may take its timeout."""
        if self.gauges is not None:
            self.gauges.stop()
        if self.owned is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self.owned.provider.shutdown)


def set_up_metrics(
    settings: Settings,
    redis: Redis,
    directory: Directory,
    cataloged: Callable[[str], Collection[str]],
    given: MetricsExport | None = None,
) -> MetricsSetup:
    """The app's metrics: ``given`` (tests hand in a provider with an in-memory reader), else a
    provider of :func:`~gateway.telemetry.export.metrics_export`, else none when
    ``JOBGATE_METRICS`` is off. ``cataloged(queue)`` gives the queue's cataloged task names
    (cached, never read from Redis)."""
    if given is None and not settings.metrics:
        return MetricsSetup(Metrics())
    export = given or metrics_export()

    def granularity(queue: str) -> MetricsGranularity | None:
        view = directory.peek(queue)
        return None if view is None else view.policy.metrics_granularity

    meter = export.provider.get_meter(METER_NAME)
    labels = TaskLabels(granularity, cataloged, max_names=settings.metrics_max_task_names)
    gauges = QueueGauges(meter, GaugeStore(redis), asyncio.get_running_loop())
    return MetricsSetup(
        GatewayMetrics(meter, labels),
        PrometheusPage(export, gauges),
        gauges,
        None if given is not None else export,
    )
