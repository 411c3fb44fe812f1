"""The Grafana dashboard and the Prometheus alert rules under deploy/ load (valid JSON, YAML),
and every metric they query is one the gateway or an SDK worker really exports, under the name
OpenTelemetry's Prometheus exporter gives it (``_total``, ``_milliseconds``, ``_seconds``)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from redis.asyncio import Redis

from gateway.store.gauges import GaugeStore
from gateway.store.keys import QUEUES, QueueKeys
from gateway.store.records import Lease
from gateway.store.tasks import Fence, Finish, Finished
from gateway.telemetry.export import METER_NAME, metrics_export
from gateway.telemetry.gauges import QueueGauges
from gateway.telemetry.labels import TaskLabels
from gateway.telemetry.metrics import GatewayMetrics
from sdk.telemetry.metrics import WorkerMetrics
from sdk.wire import AttemptOutcome, PushBody, TaskState

ROOT = Path(__file__).parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "jobgate-dashboard.json"
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yaml"
SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*[{\[]")
BY = re.compile(r"\bby\s*\(([^)]*)\)")
SCRAPE_LABELS = {"job", "instance", "le"}  # added by Prometheus, or the buckets' own


def exported(prometheus_text: str) -> tuple[set[str], set[str]]:
    """Every sample name and every label name in a Prometheus text page."""
    samples, labels = set(), set()
    for family in text_string_to_metric_families(prometheus_text):
        for sample in family.samples:
            samples.add(sample.name)
            labels |= set(sample.labels)
    return samples, labels


async def gateway_page(redis_url: str) -> str:
    """The gateway's /metrics page after recording one of everything."""
    export = metrics_export({})
    meter = export.provider.get_meter(METER_NAME)
    metrics = GatewayMetrics(meter, TaskLabels(lambda q: None, lambda q: ()))
    redis = Redis.from_url(redis_url, decode_responses=True)
    gauges = QueueGauges(meter, GaugeStore(redis), asyncio.get_running_loop())
    await redis.sadd(QUEUES, "q")
    await redis.hset(QueueKeys.of("q").inflight, "ep", 0)
    lease = Lease("q", "T1", "ep", "tok", "t", 1, None, "null", None, 2, 3, None, 0, 1)
    metrics.enqueued("q", ["t"])
    metrics.selected([lease])
    metrics.pushed("q", "ep", "2xx", 5.0)
    ends = [
        (AttemptOutcome.ERROR, Finished(Fence.OK, TaskState.SCHEDULED, None, "t", "v1", 1, 0)),
        (
            AttemptOutcome.FAILED,
            Finished(Fence.OK, TaskState.DEAD, None, "t", "v1", 1, 0, "open", "ep"),
        ),
    ]
    for outcome, done in ends:
        metrics.finished("q", [Finish("T1", "tok", outcome)], [done], 10)
    await gauges.refresh()
    assert export.registry is not None
    text = generate_latest(export.registry).decode()
    export.provider.shutdown()
    await redis.aclose()
    return text


def worker_page() -> str:
    registry = CollectorRegistry()
    provider = MeterProvider(metric_readers=[PrometheusMetricReader(registry=registry)])
    metrics = WorkerMetrics({"t"}, provider)
    push = PushBody.model_validate(
        {
            "id": "T1",
            "queue": "q",
            "name": "t",
            "attempt": 1,
            "lease_expires_at": "2030-01-01T00:00:00Z",
            "deadline": "2030-01-01T00:00:00Z",
            "ready_at": "2020-01-01T00:00:00Z",
        }
    )
    metrics.delivered(push)
    metrics.processed(push, "succeeded", 3.0)
    text = generate_latest(registry).decode()
    provider.shutdown()
    return text


def dashboard_queries(dashboard: dict[str, Any]) -> Iterator[str]:
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            yield target["expr"]


def alert_queries(rules: dict[str, Any]) -> Iterator[str]:
    for group in rules["groups"]:
        for rule in group["rules"]:
            yield rule["expr"]


async def test_every_metric_the_dashboard_and_alerts_query_is_exported(redis_url: str) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    rules = yaml.safe_load(ALERTS.read_text())
    gateway_samples, gateway_labels = exported(await gateway_page(redis_url))
    worker_samples, worker_labels = exported(worker_page())
    samples = gateway_samples | worker_samples
    labels = gateway_labels | worker_labels | SCRAPE_LABELS
    assert "tasks_processed_total" in gateway_samples  # the exporter's names, as scraped
    assert "execution_time_milliseconds_bucket" in gateway_samples
    assert "worker_uptime_seconds" in worker_samples

    queries = [*dashboard_queries(dashboard), *alert_queries(rules)]
    assert len(queries) >= 20
    variables = [v["definition"] for v in dashboard["templating"]["list"] if "definition" in v]
    for query in queries:
        names = SELECTOR.findall(query)
        assert names, f"no metric selector in {query!r}"
        for name in names:
            assert name in samples, f"{name} (in {query!r}) is not exported"
        for group in BY.findall(query):
            for label in (part.strip() for part in group.split(",")):
                assert label in labels, f"label {label} (in {query!r}) is not exported"
    for definition in variables:
        (name,) = re.findall(r"label_values\((\w+),", definition)
        assert name in samples, definition


def test_the_dashboard_shows_what_operators_asked_for() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    titles = " | ".join(p["title"].lower() for p in dashboard["panels"])
    for wanted in (
        "queue length",
        "time in queue",
        "execution time",
        "completion rate",
        "retries and dead letters",
        "pushes by answer",
        "circuit",
    ):
        assert wanted in titles, wanted
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))


def test_the_alert_rules_cover_stalled_queues_dead_letters_and_open_circuits() -> None:
    rules = yaml.safe_load(ALERTS.read_text())
    names = {rule["alert"] for group in rules["groups"] for rule in group["rules"]}
    assert {"JobgateQueueStalled", "JobgateDeadLettersGrowing", "JobgateCircuitOpen"} <= names
    for group in rules["groups"]:
        for rule in group["rules"]:
            assert rule["labels"]["severity"] in {"critical", "warning", "info"}
            assert rule["annotations"]["summary"]
