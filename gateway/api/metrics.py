"""``GET /metrics``: the gateway's OpenTelemetry metrics in Prometheus text format.

Protected like the API: a key with the ``metrics`` scope (made for a scraper: it may read
nothing else), ``read`` or ``admin``. Each gateway serves its own numbers; see
docs/observability.md for what they mean and how to add them up across gateways.
"""

from __future__ import annotations

from starlette.responses import Response

from gateway.api.routing import Call, Operation
from gateway.core.errors import NotFound
from gateway.security.auth import Access
from gateway.telemetry.export import PROMETHEUS_CONTENT_TYPE


async def scrape_metrics(call: Call) -> Response:
    page = call.services.metrics
    text = None if page is None else await page.text()
    if text is None:
        raise NotFound("this gateway records no metrics (JOBGATE_METRICS=false)")
    return Response(text, media_type=PROMETHEUS_CONTENT_TYPE)


OPERATIONS = [
    Operation(
        "GET",
        "/metrics",
        "Read this gateway's metrics in Prometheus text format",
        "observability",
        Access.METRICS,
        scrape_metrics,
        text="text/plain",
        errors=(404,),
        description="OpenTelemetry metrics (tasks enqueued, selected, processed; time in "
        "queue, execution time and end-to-end latency histograms in ms; retries, dead letters, "
        "pushes, circuit changes; queue depth and pushes in flight read from Redis now), as "
        "OpenTelemetry's Prometheus exporter names them. Needs a key with the 'metrics', "
        "'read' or 'admin' scope. 404 when metrics are off (JOBGATE_METRICS=false).",
    ),
]
