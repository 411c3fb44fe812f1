"""The worker's own metrics (role=worker), read through the SDK's in-memory reader: recorded
into the meter provider it is given, and a no-op without one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import Gauge, Histogram, InMemoryMetricReader, Sum

from sdk import Fail, Retry, task
from sdk.telemetry.metrics import MS_BUCKETS
from tests.sdk.fakes import OTHER_SECRET, MakeWorker, Serve
from tests.support import until


@task("default", name="double")
def double(x: int) -> int:
    return 2 * x


@task("default", name="later")
def later() -> None:
    raise Retry(delay=1)


@task("default", name="never")
async def never() -> None:
    raise Fail("no")


def read(reader: InMemoryMetricReader) -> dict[str, tuple[type, dict[Any, Any]]]:
    data = reader.get_metrics_data()
    found: dict[str, tuple[type, dict[Any, Any]]] = {}
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            assert scope.scope.name == "jobgate.worker"
            for metric in scope.metrics:
                found[metric.name] = (
                    type(metric.data),
                    {frozenset((p.attributes or {}).items()): p for p in metric.data.data_points},
                )
    return found


def key(**attributes: str) -> frozenset[tuple[str, str]]:
    return frozenset(attributes.items())


async def test_a_worker_records_deliveries_ends_refusals_and_uptime(
    make_worker: MakeWorker, serve: Serve
) -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    worker = make_worker([double, later, never], meter_provider=provider)
    ready = (datetime.now(UTC) - timedelta(seconds=2)).isoformat()
    async with serve(worker) as push:
        assert (await push("double", {"args": [2]}, ready_at=ready)).status_code == 200
        assert (await push("double", {"args": [3]})).status_code == 200
        assert (await push("later", {})).status_code == 500
        assert (await push("never", {})).status_code == 422
        assert (await push("ghost", {})).status_code == 404
        assert (await push("double", {"args": [1]}, secret=OTHER_SECRET)).status_code == 401
    found = read(reader)
    kinds = {name: kind for name, (kind, _) in found.items()}
    assert kinds == {
        "tasks_selected": Sum,
        "time_in_queue": Histogram,
        "tasks_processed": Sum,
        "execution_time": Histogram,
        "worker_uptime": Gauge,
    }

    def values(name: str) -> dict[Any, Any]:
        kind, points = found[name]
        if kind is Histogram:
            assert all(tuple(p.explicit_bounds) == MS_BUCKETS for p in points.values())
            return {k: p.count for k, p in points.items()}
        return {k: p.value for k, p in points.items()}

    w = "worker"
    assert values("tasks_selected") == {
        key(task="double", queue="default", role=w): 2,
        key(task="later", queue="default", role=w): 1,
        key(task="never", queue="default", role=w): 1,
        key(task="other", queue="default", role=w): 1,  # not a task of this worker
    }
    # Only the push that said when its task was due gives a time in queue: about 2 s.
    ((attrs, waited),) = found["time_in_queue"][1].items()
    assert attrs == key(task="double", queue="default", role=w)
    assert waited.count == 1
    assert 2000 <= waited.sum < 10_000
    assert values("tasks_processed") == {
        key(task="double", queue="default", status="succeeded"): 2,
        key(task="later", queue="default", status="error"): 1,
        key(task="never", queue="default", status="failed"): 1,
        key(task="other", queue="default", status="dropped"): 1,
        key(task="*", queue="*", status="dropped"): 1,  # a bad signature: nothing is read
    }
    assert values("execution_time") == {
        key(task="double", queue="default", status="succeeded"): 2,
        key(task="later", queue="default", status="error"): 1,
        key(task="never", queue="default", status="failed"): 1,
    }
    ((uptime_attrs, uptime),) = found["worker_uptime"][1].items()
    assert uptime_attrs == frozenset()
    assert uptime.value > 0
    provider.shutdown()


@task("default", name="slow", inline=False)
async def slow() -> str:
    return "done"


async def test_a_task_answered_202_is_recorded_when_it_ends(
    make_worker: MakeWorker, serve: Serve
) -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    worker = make_worker([slow], meter_provider=provider)
    async with serve(worker) as push:
        assert (await push("slow", {})).status_code == 202

        def ended() -> bool:
            found = read(reader)
            return "tasks_processed" in found and any(
                p.value == 1 for p in found["tasks_processed"][1].values()
            )

        await until(ended, what="the background task's end to be recorded")
    points = read(reader)["tasks_processed"][1]
    assert set(points) == {key(task="slow", queue="default", status="succeeded")}
    provider.shutdown()


async def test_without_a_meter_provider_the_worker_records_nothing_and_works(
    make_worker: MakeWorker, serve: Serve
) -> None:
    worker = make_worker([double])
    async with serve(worker) as push:
        answer = await push("double", {"args": [4]})
    assert (answer.status_code, answer.json()) == (200, 8)
