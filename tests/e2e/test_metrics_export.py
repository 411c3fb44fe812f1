"""How metrics leave a real gateway process: ``GET /metrics`` in Prometheus text (parsed with
prometheus_client's parser, guarded by the ``metrics`` scope), and OTLP over HTTP/protobuf to
a collector stub on loopback when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set."""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

import httpx
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.e2e.conftest import ADMIN, Cluster
from tests.support import free_port, serve, until

SCRAPER = "metrics-scraper-key-0123456789"
PRODUCER = "metrics-producer-key-0123456789"
KEYS = json.dumps(
    [
        {"key": ADMIN, "scopes": ["admin"]},
        {"key": SCRAPER, "scopes": ["metrics"]},
        {"key": PRODUCER, "scopes": ["enqueue:*"]},
    ]
)


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


def run_two_tasks(cluster: Cluster, gateway: str) -> None:
    """Queue ``mx`` with one endpoint on a real worker; two ``ok`` tasks run to success."""
    api = httpx.Client(base_url=gateway, headers=bearer(ADMIN), timeout=30)
    port = free_port()
    assert api.put("/v1/queues/mx", json={}).status_code == 201
    made = api.post("/v1/queues/mx/endpoints", json={"url": f"http://127.0.0.1:{port}/"}).json()
    cluster.worker(
        "",
        port,
        cluster.tmp / "pushes.log",
        app="tests.e2e.metrics_worker_app:app",
        JOBGATE_WORKER_SECRETS=json.dumps([made["secret"]]),
    )
    for i in range(2):
        body = {"name": "ok", "payload": {"args": [i], "kwargs": {}}}
        assert api.post("/v1/queues/mx/tasks", json=body).status_code == 201
    deadline = time.monotonic() + 30
    while api.get("/v1/queues/mx").json()["counts"]["succeeded"] < 2:
        assert time.monotonic() < deadline, "the tasks did not succeed within 30 s"
        time.sleep(0.02)  # polling, with the deadline above
    api.close()


def admin_queue_card(gateway: str, queue: str) -> dict[str, float]:
    """The numbers of ``queue``'s card on the admin queues page, signed in with the admin key:
    its count per state and its tasks succeeded in the last minute (``succeeded-1m``)."""
    with httpx.Client(base_url=gateway, timeout=30) as web:
        form = web.get("/admin/login")
        csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
        assert csrf is not None
        data = {"csrf": csrf.group(1), "api_key": ADMIN, "next": "/admin/queues"}
        assert web.post("/admin/login", data=data).status_code == 303
        page = web.get("/admin/queues").text
    card = page[page.index(f'data-queue="{queue}"') :]
    card = card[: card.index("</section>")]
    found = {
        state: float(n)
        for n, state in re.findall(
            r'<span class="n">(\d+)</span><span class="s">([a-z]+)</span>', card
        )
    }
    rate = re.search(r'data-rate="succeeded-1m">(\d+)<', card)
    assert rate is not None
    found["succeeded-1m"] = float(rate.group(1))
    return found


def test_metrics_scrape_parses_as_prometheus_text_and_needs_the_metrics_scope(
    cluster: Cluster,
) -> None:
    gateway = cluster.gateway(JOBGATE_API_KEYS=KEYS)
    run_two_tasks(cluster, gateway)
    assert httpx.get(f"{gateway}/metrics").status_code == 401
    assert httpx.get(f"{gateway}/metrics", headers=bearer(PRODUCER)).status_code == 403
    # A scraper's key reads the metrics and nothing else.
    assert httpx.get(f"{gateway}/v1/queues", headers=bearer(SCRAPER)).status_code == 403
    scraped = httpx.get(f"{gateway}/metrics", headers=bearer(SCRAPER))
    assert scraped.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain")

    families = {f.name: f for f in text_string_to_metric_families(scraped.text)}
    kinds = {name: f.type for name, f in families.items()}
    assert kinds["tasks_enqueued"] == "counter"
    assert kinds["tasks_selected"] == "counter"
    assert kinds["tasks_processed"] == "counter"
    assert kinds["time_in_queue_milliseconds"] == "histogram"
    assert kinds["execution_time_milliseconds"] == "histogram"
    assert kinds["end_to_end_latency_milliseconds"] == "histogram"
    assert kinds["push_duration_milliseconds"] == "histogram"
    assert kinds["queue_depth"] == "gauge"
    assert kinds["endpoint_in_flight"] == "gauge"

    def value(sample_name: str, **labels: str) -> float:
        family = families[sample_name.removesuffix("_total").removesuffix("_count")]
        for s in family.samples:
            if s.name == sample_name and labels.items() <= s.labels.items():
                return float(s.value)
        raise AssertionError(f"no sample {sample_name} {labels}")

    assert value("tasks_enqueued_total", queue="mx", task="ok") == 2
    assert value("tasks_selected_total", queue="mx", task="ok", role="gateway") == 2
    assert value("tasks_processed_total", queue="mx", task="ok", status="succeeded") == 2
    assert value("push_duration_milliseconds_count", queue="mx", answer="2xx") == 2
    family = families["execution_time_milliseconds"]
    count = [s for s in family.samples if s.name.endswith("_count")]
    assert [s.value for s in count] == [2]
    buckets = [s for s in family.samples if s.name.endswith("_bucket")]
    bounds = [float(b.labels["le"]) for b in buckets]
    assert bounds[0] == 1  # ms
    assert bounds[-2:] == [3_600_000, float("inf")]  # 1 h, then the rest
    assert value("queue_depth", queue="mx", state="succeeded") == 2
    assert value("queue_depth", queue="mx", state="queued") == 0

    # The admin queue page shows the same numbers: its counts are the queue_depth gauge's,
    # its "succeeded last minute" the end_to_end_latency count of status succeeded.
    card = admin_queue_card(gateway, "mx")
    assert len(card) == 9  # eight states, and the rate
    for state, shown in card.items():
        if state != "succeeded-1m":
            assert shown == value("queue_depth", queue="mx", state=state), state
    succeeded = value("end_to_end_latency_milliseconds_count", queue="mx", status="succeeded")
    assert card["succeeded-1m"] == succeeded == 2

    # The granularity is a policy field like the others: checked, and changed by a PATCH.
    with httpx.Client(base_url=gateway, headers=bearer(ADMIN)) as api:
        refused = api.patch("/v1/queues/mx", json={"metrics_granularity": "tiny"})
        assert refused.status_code == 422
        assert "metrics_granularity" in refused.text
        changed = api.patch("/v1/queues/mx", json={"metrics_granularity": "queue"})
        assert changed.json()["policy"]["metrics_granularity"] == "queue"


def test_metrics_off_records_nothing_and_the_scrape_is_not_found(cluster: Cluster) -> None:
    gateway = cluster.gateway(JOBGATE_API_KEYS=KEYS, JOBGATE_METRICS="false")
    answer = httpx.get(f"{gateway}/metrics", headers=bearer(SCRAPER))
    assert answer.status_code == 404
    assert "JOBGATE_METRICS" in answer.json()["detail"]


async def test_metrics_reach_an_otlp_collector_when_the_endpoint_is_set(
    cluster: Cluster,
) -> None:
    received: list[ExportMetricsServiceRequest] = []

    async def collect(request: Request) -> Response:
        assert request.headers["content-type"] == "application/x-protobuf"
        message = ExportMetricsServiceRequest()
        message.ParseFromString(await request.body())
        received.append(message)
        return Response(b"", media_type="application/x-protobuf")

    collector = Starlette(routes=[Route("/v1/metrics", collect, methods=["POST"])])
    async with serve(collector) as collector_url:
        gateway = await asyncio.to_thread(
            cluster.gateway,
            JOBGATE_API_KEYS=KEYS,
            OTEL_EXPORTER_OTLP_ENDPOINT=collector_url,
            OTEL_METRIC_EXPORT_INTERVAL="200",
        )
        await asyncio.to_thread(run_two_tasks, cluster, gateway)

        def points(name: str) -> list[Any]:
            found = []
            for message in received:
                for resource in message.resource_metrics:
                    for scope in resource.scope_metrics:
                        for metric in scope.metrics:
                            if metric.name == name:
                                kind = metric.WhichOneof("data")
                                found += list(getattr(metric, kind).data_points)
            return found

        def latest(name: str) -> float:
            return max((p.as_int for p in points(name)), default=0)

        # Gauges are read at most once a second, counters at every export: wait for both.
        await until(
            lambda: latest("tasks_processed") == 2 and latest("queue_depth") == 2,
            timeout=20,
            what="tasks_processed and queue_depth over OTLP",
        )
        await asyncio.to_thread(cluster.stop)  # while the collector still answers
    resource = received[-1].resource_metrics[0].resource
    attributes = {a.key: a.value.string_value for a in resource.attributes}
    assert attributes["service.name"] == "jobgate-gateway"
    assert attributes["service.instance.id"]
    (histogram, *_) = [p for p in points("execution_time") if p.count == 2]
    assert list(histogram.explicit_bounds)[-1] == 3_600_000
