"""How job runs ended, kept with the runs, so a job's run history outlives task retention.

A run's task is enqueued with its job in its record (``jb``; the run id is the task id). The
script that ends such a task (``finish``, ``cancel``, or a dependency failing it) appends the
end to the task's queue's ``outbox`` in the same step (``record_run_end`` in
``lua/prelude.lua``): ``{"run": job id, "id": run id, "state", "att", "first", "finished",
"error", "warn"}``, the task record's own fields. The run's record lives in the job's keys, on
another Redis Cluster slot, so the recoverer of any gateway delivers it there (with the
dependency notices of the same outbox: :meth:`DependencyStore.deliver`) through
``lua/run_ended.lua``, and only then drops it from the outbox: a gateway that stops in between
leaves it to the next delivery. So every end is kept, whichever gateway (or recoverer, on a
lease that ran out) ended the task.

An end is kept in field ``<run id>:end`` of the job's run records hash (:func:`end_field`),
beside the record. Keeping one is idempotent, and a later end wins over an earlier one
(a resubmitted run's task ends again), whatever the order of delivery.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from gateway.store.keys import JobKeys
from gateway.store.scripts import Scripts

END_FIELDS = ("state", "att", "first", "finished", "error", "warn")
"""The fields of a task record that make a run's end (``lua/prelude.lua``, record_run_end)."""

RunEnd = tuple[str, str, dict[str, Any]]
"""A run's end: (job id, run id, the end's fields)."""


def end_field(run_id: str) -> str:
    """The field of the job's run records hash that keeps the run's end."""
    return f"{run_id}:end"


def end_of(task: dict[str, Any]) -> dict[str, Any]:
    """A finished task's end, as its script puts it in the outbox."""
    return {f: task[f] for f in END_FIELDS if task.get(f) is not None}


def run_end_notice(notice: Any) -> RunEnd | None:
    """The run's end an outbox entry holds, or None for another notice (a dependency's, a
    JSON list; a child's end or enqueue, a JSON object without ``run``)."""
    if not isinstance(notice, dict) or "run" not in notice:
        return None
    end = {f: notice[f] for f in END_FIELDS if notice.get(f) is not None}
    return str(notice["run"]), str(notice["id"]), end


async def keep_ends(scripts: Scripts, ends: Sequence[RunEnd]) -> None:
    """Keep each end with its run (one script per job): ``lua/run_ended.lua``."""
    by_job: dict[str, list[str]] = defaultdict(list)
    for job_id, run_id, end in ends:
        by_job[job_id] += (run_id, json.dumps(end, separators=(",", ":")))
    for job_id, args in by_job.items():
        await scripts.call("run_ended", [JobKeys.of(job_id).run], args)
