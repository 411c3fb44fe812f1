"""The lone enqueue's narrower paths give what the general ones give: the queue's keys kept
between calls, and a lone task's count without a Counter."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from gateway.store.keys import QueueKeys
from gateway.telemetry.labels import TaskLabels
from gateway.telemetry.metrics import GatewayMetrics


def test_the_kept_keys_of_a_queue_are_the_keys_made_anew() -> None:
    for queue in ("mail", "tenant:42", "a{b}"):
        assert QueueKeys.of(queue) == QueueKeys.made(queue)
        assert QueueKeys.of(queue) is QueueKeys.of(queue)
    assert QueueKeys.of("mail") != QueueKeys.of("post")


def enqueued(calls: list[list[str]]) -> dict[tuple[Any, ...], Any]:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    metrics = GatewayMetrics(provider.get_meter("t"), TaskLabels(lambda q: None, lambda q: ()))
    for names in calls:
        metrics.enqueued("q", names)
    data = reader.get_metrics_data()
    assert data is not None
    points = {}
    for scope in data.resource_metrics[0].scope_metrics:
        for metric in scope.metrics:
            for p in metric.data.data_points:
                attributes = tuple(sorted(p.attributes.items()))
                points[metric.name, attributes] = p.value  # type: ignore[union-attr]
    provider.shutdown()
    return points


def test_lone_enqueues_count_what_a_batch_of_them_counts() -> None:
    names = ["a", "b", "a", "a"]
    alone = enqueued([[name] for name in names])
    assert alone == enqueued([names])
    assert sorted(alone.values()) == [1, 3]
