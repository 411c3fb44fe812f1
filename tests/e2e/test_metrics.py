"""The gateway's metrics after known work: a gateway run in this process (its meter provider
read through the SDK's in-memory reader) pushing to a real SDK worker process, over loopback.

The work: on queue m1 (a circuit that opens at the first failure, and an endpoint whose
failures are not marked as the task's own), three ``ok`` and one ``flaky`` (a retry, then
success); on m2, two ``ok``, one ``doomed`` (fails: dead letter,
version v2) and one ``ghost`` (no such task on the worker: 404, dropped); on m3 (granularity
``queue``) two ``ok``; on m4, whose secret the worker does not know, one ``ok`` (401, dropped).
Every metric's name, type, attribute sets and counts are checked against that.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    Gauge,
    Histogram,
    InMemoryMetricReader,
    MetricsData,
    Sum,
)

from gateway.app import create_app
from gateway.settings import ApiKey, Settings
from gateway.telemetry.export import MetricsExport
from sdk.telemetry.metrics import MS_BUCKETS
from tests.e2e.conftest import Cluster
from tests.support import bind, free_port, serve, until

ADMIN = "metrics-admin-key-0123456789"
FAST = {"backoff": {"strategy": "constant", "base_delay": 0, "max_delay": 0}, "max_attempts": 3}
QUEUES = {
    "m1": {**FAST, "circuit_breaker": {"failures": 1, "open_for": 0.2, "max_open_for": 0.2}},
    "m2": FAST,
    "m3": {**FAST, "metrics_granularity": "queue"},
    "m4": FAST,
}
WORK = [  # queue, name, how many, version
    ("m1", "ok", 3, None),
    ("m1", "flaky", 1, None),
    ("m2", "ok", 2, None),
    ("m2", "doomed", 1, "v2"),
    ("m2", "ghost", 1, None),
    ("m3", "ok", 1, None),
    ("m3", "flaky", 1, None),
    ("m4", "ok", 1, None),
]
ENDED = {"m1": 4, "m2": 4, "m3": 2, "m4": 1}  # tasks that end (succeeded or dead) per queue

Series = dict[frozenset[tuple[str, Any]], Any]


@dataclass
class Live:
    api: httpx.AsyncClient
    reader: InMemoryMetricReader
    endpoints: dict[str, str]  # queue -> endpoint id


def points(data: MetricsData) -> dict[str, tuple[type, Series]]:
    """Every metric of the data: its type, and its points by attribute set."""
    found: dict[str, tuple[type, Series]] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                series: Series = {
                    frozenset((p.attributes or {}).items()): p for p in metric.data.data_points
                }
                found[metric.name] = (type(metric.data), series)
    return found


def key(**attributes: str) -> frozenset[tuple[str, str]]:
    return frozenset(attributes.items())


@pytest.fixture
async def live(cluster: Cluster) -> AsyncIterator[Live]:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    sock = bind()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    settings = Settings(
        redis_url=cluster.redis_url,
        api_keys=[ApiKey(key=ADMIN, scopes=["admin"])],
        allow_private_endpoints=True,
        recover_interval=0.05,
        public_url=url,
    )
    app = create_app(settings, metrics=MetricsExport(provider))
    worker_port = free_port()
    async with (
        serve(app, sock),
        httpx.AsyncClient(
            base_url=url, headers={"authorization": f"Bearer {ADMIN}"}, timeout=30
        ) as api,
    ):
        secrets, endpoints = {}, {}
        for queue, policy in QUEUES.items():
            assert (await api.put(f"/v1/queues/{queue}", json=policy)).status_code == 201
            path = "/unmarked/" if queue == "m1" else "/"  # m1's failures count against it
            made = await api.post(
                f"/v1/queues/{queue}/endpoints",
                json={"url": f"http://127.0.0.1:{worker_port}{path}"},
            )
            assert made.status_code == 201, made.text
            secrets[queue], endpoints[queue] = made.json()["secret"], made.json()["id"]
        known = json.dumps([secrets[q] for q in ("m1", "m2", "m3")])  # not m4's
        await asyncio.to_thread(
            cluster.worker,
            "",
            worker_port,
            cluster.tmp / "pushes.log",
            app="tests.e2e.metrics_worker_app:app",
            JOBGATE_WORKER_SECRETS=known,
        )
        yield Live(api, reader, endpoints)
    provider.shutdown()


async def test_metrics_after_known_work_have_every_name_type_attribute_and_count(
    live: Live,
) -> None:
    api = live.api
    for queue, name, n, version in WORK:
        for i in range(n):
            body: dict[str, Any] = {"name": name, "payload": {"args": [], "kwargs": {}}}
            if name == "ok":
                body["payload"] = {"args": [i], "kwargs": {}}
            if version:
                body["version"] = version
            assert (await api.post(f"/v1/queues/{queue}/tasks", json=body)).status_code == 201

    async def all_ended() -> bool:
        for queue, n in ENDED.items():
            counts = (await api.get(f"/v1/queues/{queue}")).json()["counts"]
            if counts["succeeded"] + counts["dead"] != n:
                return False
        return True

    await until(all_ended, timeout=30, what="every task to end")
    # Collected on another thread, as an exporter does: the gauges ask the loop for a reading.
    found = points(await asyncio.to_thread(live.reader.get_metrics_data))

    def counts(name: str, kind: type) -> dict[frozenset[tuple[str, Any]], int]:
        assert name in found, f"{name} missing; have {sorted(found)}"
        got_kind, series = found[name]
        assert got_kind is kind, (name, got_kind)
        if kind is Histogram:
            for point in series.values():
                assert tuple(point.explicit_bounds) == MS_BUCKETS
            return {attrs: p.count for attrs, p in series.items()}
        return {attrs: p.value for attrs, p in series.items()}

    gw = "gateway"
    assert counts("tasks_enqueued", Sum) == {
        key(queue="m1", task="ok"): 3,
        key(queue="m1", task="flaky"): 1,
        key(queue="m2", task="ok"): 2,
        key(queue="m2", task="doomed"): 1,
        key(queue="m2", task="ghost"): 1,
        key(queue="m3", task="*"): 2,
        key(queue="m4", task="ok"): 1,
    }
    selected = {
        key(task="ok", queue="m1", role=gw): 3,
        key(task="flaky", queue="m1", role=gw): 2,
        key(task="ok", queue="m2", role=gw): 2,
        key(task="doomed", queue="m2", role=gw): 1,
        key(task="ghost", queue="m2", role=gw): 1,
        key(task="*", queue="m3", role=gw): 3,
        key(task="ok", queue="m4", role=gw): 1,
    }
    assert counts("tasks_selected", Sum) == selected
    assert counts("time_in_queue", Histogram) == selected
    processed = {
        key(task="ok", queue="m1", status="succeeded"): 3,
        key(task="flaky", queue="m1", status="error"): 1,
        key(task="flaky", queue="m1", status="succeeded"): 1,
        key(task="ok", queue="m2", status="succeeded"): 2,
        key(task="doomed", queue="m2", status="failed"): 1,
        key(task="ghost", queue="m2", status="dropped"): 1,
        key(task="*", queue="m3", status="succeeded"): 2,
        key(task="*", queue="m3", status="error"): 1,
        key(task="ok", queue="m4", status="dropped"): 1,
    }
    assert counts("tasks_processed", Sum) == processed
    assert counts("execution_time", Histogram) == processed
    assert counts("end_to_end_latency", Histogram) == {
        key(task="ok", queue="m1", status="succeeded"): 3,
        key(task="flaky", queue="m1", status="succeeded"): 1,
        key(task="ok", queue="m2", status="succeeded"): 2,
        key(task="doomed", queue="m2", status="dead"): 1,
        key(task="ghost", queue="m2", status="dropped"): 1,
        key(task="*", queue="m3", status="succeeded"): 2,
        key(task="ok", queue="m4", status="dropped"): 1,
    }
    assert counts("tasks_retried", Sum) == {
        key(task="flaky", version="", queue="m1"): 1,
        key(task="*", version="", queue="m3"): 1,
    }
    assert counts("tasks_dead_lettered", Sum) == {
        key(task="doomed", version="v2", queue="m2"): 1,
        key(task="ghost", version="", queue="m2"): 1,
        key(task="ok", version="", queue="m4"): 1,
    }
    ep = live.endpoints
    pushes = {
        key(queue="m1", endpoint=ep["m1"], answer="2xx"): 4,
        key(queue="m1", endpoint=ep["m1"], answer="5xx"): 1,
        key(queue="m2", endpoint=ep["m2"], answer="2xx"): 2,
        key(queue="m2", endpoint=ep["m2"], answer="4xx"): 2,
        key(queue="m3", endpoint=ep["m3"], answer="2xx"): 2,
        key(queue="m3", endpoint=ep["m3"], answer="5xx"): 1,
        key(queue="m4", endpoint=ep["m4"], answer="4xx"): 1,
    }
    assert "pushes" not in found  # push_duration's count counts them
    assert counts("push_duration", Histogram) == pushes
    # m1's circuit opened at flaky's failure and closed at the next success.
    assert counts("circuit_changes", Sum) == {
        key(queue="m1", endpoint=ep["m1"], state="open"): 1,
        key(queue="m1", endpoint=ep["m1"], state="closed"): 1,
    }
    depth = Counter(counts("queue_depth", Gauge))
    finished = {
        ("m1", "succeeded"): 4,
        ("m2", "succeeded"): 2,
        ("m2", "dead"): 2,
        ("m3", "succeeded"): 2,
        ("m4", "dead"): 1,
    }
    states = ("scheduled", "waiting", "queued", "running", "succeeded", "failed", "dead")
    assert depth == {
        key(queue=q, state=s): finished.get((q, s), 0)
        for q in QUEUES
        for s in (*states, "cancelled")
    }
    assert counts("endpoint_in_flight", Gauge) == {key(queue=q, endpoint=ep[q]): 0 for q in QUEUES}
    # m1's circuit closed again; the others never opened.
    assert counts("endpoint_circuit_open", Gauge) == {
        key(queue=q, endpoint=ep[q]): 0 for q in QUEUES
    }
