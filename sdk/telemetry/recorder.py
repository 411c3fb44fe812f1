"""Where a worker records its metrics: :class:`~sdk.telemetry.metrics.WorkerMetrics` when the
application uses OpenTelemetry, else :class:`NoMetrics`, which records nothing.

"Uses" means it handed the worker a meter provider (``Worker(..., meter_provider=...)``) or has
imported OpenTelemetry's metrics API, through which a global provider is set. Without either
there is no provider to record into, and the worker does not import OpenTelemetry at all (it
is an optional dependency: the ``otel`` extra of ``jobgate-sdk``). The choice is made when the
worker is built and made again when its lifespan starts, so a provider that the application
sets up in between (in its own startup) is used; one set up later still is not.
"""

from __future__ import annotations

import sys
from collections.abc import Collection
from typing import TYPE_CHECKING, Protocol

from sdk.outcomes import Refusal, Stop, Verdict
from sdk.wire import PushBody

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider

__all__ = ["NoMetrics", "Recorder", "worker_metrics"]

_OTEL_METRICS = "opentelemetry.metrics"


class Recorder(Protocol):
    """What the worker records (:class:`~sdk.telemetry.metrics.WorkerMetrics` says when)."""

    def delivered(self, push: PushBody) -> None: ...

    def processed(self, push: PushBody | None, status: str, ms: float | None = None) -> None: ...

    def ended(
        self, push: PushBody, verdict: Verdict | None, stopped: Stop | None, ms: float
    ) -> None: ...

    def refused(self, push: PushBody, refusal: Refusal) -> None: ...


class NoMetrics:
    """Records nothing: the application does not use OpenTelemetry."""

    def delivered(self, push: PushBody) -> None:
        pass

    def processed(self, push: PushBody | None, status: str, ms: float | None = None) -> None:
        pass

    def ended(
        self, push: PushBody, verdict: Verdict | None, stopped: Stop | None, ms: float
    ) -> None:
        pass

    def refused(self, push: PushBody, refusal: Refusal) -> None:
        pass


def worker_metrics(tasks: Collection[str], provider: MeterProvider | None) -> Recorder:
    """The recorder of a worker serving ``tasks`` (module docstring)."""
    if provider is None and _OTEL_METRICS not in sys.modules:
        return NoMetrics()
    from sdk.telemetry.metrics import WorkerMetrics

    return WorkerMetrics(tasks, provider)
