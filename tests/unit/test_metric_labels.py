"""Bounded metric attributes: task names past the limit fold into 'other', cataloged names are
always kept, and a queue with metrics_granularity 'queue' records every task as '*'."""

from __future__ import annotations

from gateway.store.tasks import Fence, Finish, Finished
from gateway.telemetry.labels import ALL_TASKS, OTHER, TaskLabels
from gateway.telemetry.metrics import answer_class, attempt_status, final_status
from sdk.wire import AttemptOutcome, MetricsGranularity, TaskState

POLICIES = {"bulk": MetricsGranularity.QUEUE, "mail": MetricsGranularity.TASK}
CATALOG = {"mail": {"send", "bounce"}}


def labels(limit: int = 2) -> TaskLabels:
    return TaskLabels(POLICIES.get, lambda q: CATALOG.get(q, set()), max_names=limit)


def test_names_past_the_limit_fold_into_other_per_queue() -> None:
    made = labels()
    assert [made.task("q", n) for n in ("a", "b", "c", "a", "d")] == ["a", "b", OTHER, "a", OTHER]
    assert made.task("r", "c") == "c"  # another queue has its own limit


def test_cataloged_names_are_kept_beyond_the_limit() -> None:
    made = labels(limit=1)
    assert [made.task("mail", n) for n in ("x", "y", "send", "bounce")] == [
        "x",
        OTHER,
        "send",
        "bounce",
    ]


def test_a_queue_with_granularity_queue_records_every_task_as_star() -> None:
    made = labels()
    assert {made.task("bulk", f"t{i}") for i in range(50)} == {ALL_TASKS}
    assert made.version("bulk", "v9") == ALL_TASKS
    assert made.version("bulk", "") == ""


def test_versions_are_bounded_too() -> None:
    made = labels(limit=1)
    assert [made.version("q", v) for v in ("v1", "v2", "v1", "")] == ["v1", OTHER, "v1", ""]


def test_statuses() -> None:
    ok = Finished(Fence.OK, TaskState.DEAD)
    refused = Finish("T", "tok", AttemptOutcome.FAILED, http_status=404)
    assert attempt_status(refused, ok) == "dropped"
    assert final_status("dropped", TaskState.DEAD) == "dropped"
    bad_args = Finish("T", "tok", AttemptOutcome.FAILED, http_status=422)
    assert attempt_status(bad_args, ok) == "failed"
    assert final_status("failed", TaskState.DEAD) == "dead"
    cancelled = Finished(Fence.OK, TaskState.CANCELLED)
    assert attempt_status(Finish("T", "tok", AttemptOutcome.ERROR), cancelled) == "cancelled"
    assert answer_class(204, None) == "2xx"
    assert answer_class(None, "no answer within 30s") == "timeout"
    assert answer_class(None, "ClientConnectorError: refused") == "connection_error"
