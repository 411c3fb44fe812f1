"""The checks of an enqueue's keys against its queue's policy: a task may name its
``concurrency_key`` only on a queue with ``key_concurrency``. (Dedup and singleton keys are
decided by the enqueue script; the keys read from payloads, a rate key and a concurrency key,
are read into the new record: :mod:`gateway.services.enqueue.new_records`.)"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.core.errors import FieldProblem
from sdk.wire import QueuePolicy, TaskCreate


def key_problems(specs: Sequence[TaskCreate], policy: QueuePolicy) -> list[FieldProblem]:
    """A ``concurrency_key`` given to a queue without ``key_concurrency``, per task."""
    if policy.key_concurrency is not None:
        return []
    return [
        FieldProblem(f"tasks.{i}.concurrency_key", "the queue has no key_concurrency")
        for i, spec in enumerate(specs)
        if spec.concurrency_key is not None
    ]
