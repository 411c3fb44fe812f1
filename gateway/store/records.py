"""What the store keeps, as Python values, and how it becomes the wire's models.

A task record is the JSON object in a queue's ``meta`` hash (its fields are listed at the top of
``lua/prelude.lua``); times in it are milliseconds on the Redis clock.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
from pydantic import JsonValue

from sdk.wire import (
    Attempt,
    AttemptOutcome,
    NoticeState,
    NoticeStatus,
    QueuePolicy,
    StepCall,
    StepWait,
    Task,
    TaskCall,
    TaskChild,
    TaskFlow,
    TaskState,
    TaskStep,
    TaskWait,
)


@functools.lru_cache(maxsize=256)
def to_datetime(ms: float) -> datetime:
    """``ms`` since the epoch as an aware datetime; cached, as the tasks of one claim or one
    batch enqueue share their times (datetimes are immutable)."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def to_ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


def seconds_to_ms(seconds: float) -> int:
    return round(seconds * 1000)


def dump_json(value: Any) -> str:
    """Compact JSON of a value parsed from JSON (finite numbers only), with orjson: several
    times cheaper than ``json.dumps`` where every task pays it. Integers beyond 64 bits, which
    orjson refuses and JSON allows, go through ``json``."""
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


_PLAIN_DEFAULTS = {"att": 0, "hist": 0, "prio": 0, "state": "queued"}  # a text record's


def load_record(raw: str | bytes) -> dict[str, Any]:
    """A stored task record (JSON the scripts wrote: a flat object of strings, numbers, lists
    and small objects), read with orjson: about four times cheaper than ``json.loads``, and
    each claimed task's record is read once on the hot path.

    The scripts store a record without the fields at their default (``att`` and ``hist`` 0,
    ``prio`` 0, ``created`` equal to ``run_at``, ``state`` queued, ``started`` equal to
    ``first``: ``task_json`` in ``lua/prelude.lua``); they are put back here, so every reader
    sees the whole record, as from records stored before. A plain queued task's record may be
    stored as text instead (``plain_record`` there: ``<sn> <run_at> <name>``), read here too."""
    first = raw[:1]
    if first != "{" and first != b"{":
        sn, run_at, name = (raw if isinstance(raw, str) else raw.decode()).split(" ", 2)
        at = int(run_at)
        return {"name": name, "run_at": at, "created": at, "sn": int(sn), **_PLAIN_DEFAULTS}
    record: dict[str, Any] = orjson.loads(raw)
    if "att" not in record:
        record["att"] = 0
    if "hist" not in record:
        record["hist"] = 0
    if "prio" not in record:
        record["prio"] = 0
    if "state" not in record:
        record["state"] = "queued"
    if "created" not in record and "run_at" in record:
        record["created"] = record["run_at"]
    if "started" not in record and "first" in record:
        record["started"] = record["first"]
    return record


def load_json(raw: str | bytes | None) -> JsonValue:
    value: JsonValue = None if raw is None else json.loads(raw)
    return value


@dataclass(slots=True)
class NewTask:
    """A validated task, ready to be stored. Never changed once made (:func:`dataclasses.replace`
    makes another), but not ``frozen``: a frozen dataclass's ``__init__`` sets each of the 26
    fields through ``object.__setattr__``, 3.2 µs per task against 0.6, and every task of a
    batch is made here (bench/RESULTS.md, "Batch enqueue (issue 20, 2026-11-27)")."""

    id: str
    name: str
    payload_json: str
    priority: int
    created_ms: int
    run_at_ms: int
    max_attempts: int | None = None
    lease_ms: int | None = None
    run_ms: int | None = None
    traceparent: str | None = None
    tracestate: str | None = None
    dedup_key: str | None = None
    singleton_key: str | None = None
    depends_on: tuple[str, ...] = ()
    cross_deps: tuple[tuple[str, str], ...] = ()  # (queue, id) of dependencies in other queues
    # pass_results: (queue, id) of every dependency, in depends_on order, whose result is passed
    results_from: tuple[tuple[str, str], ...] = ()
    group: str | None = None
    after_group: str | None = None
    capability: str | None = None
    owner: str | None = None
    version: str | None = None
    heartbeat_ms: int | None = None
    notify: str | None = None
    rate_key: str | None = None  # its bucket under key_rate_limit (gateway.core.rate_keys)
    concurrency_key: str | None = None  # its key under key_concurrency (lua/key_limits.lua)
    # Debounce: (key, window ms, max wait ms or 0); throttle: (key, window ms, limit, delay?).
    # Each gives the enqueue script one more key (lua/enqueue.lua, "Debounce and throttle").
    debounce: tuple[str, int, int] | None = None
    throttle: tuple[str, int, int, bool] | None = None
    job: str | None = None  # the job whose run this task is (lua/prelude.lua, record_run_end)
    # The parent that invoked it: (queue, id, step) (lua/prelude.lua, record_child_end).
    parent: tuple[str, str, str] | None = None
    # cancel_on: (event name, canonical match, shape) of each entry (lua/wait_helpers.lua); the
    # enqueue script then takes the waits index's keys too (lua/enqueue.lua).
    cancel_on: tuple[tuple[str, str, str], ...] = ()

    def record_json(self) -> str:
        """The record for the enqueue script's ARGV, as it is stored: without ``prio`` at 0
        or ``created`` equal to ``run_at`` (``load_record`` puts them back), so the script can
        store a plain task's JSON as it came, its sequence number added, without encoding it
        again (``lua/enqueue.lua``)."""
        record = self.record()
        if not self.priority:
            del record["prio"]
        if self.created_ms == self.run_at_ms:
            del record["created"]
        return dump_json(record)

    def record(self) -> dict[str, Any]:
        """The task record as the enqueue script receives it (see lua/prelude.lua)."""
        record: dict[str, Any] = {
            "name": self.name,
            "prio": self.priority,
            "created": self.created_ms,
            "run_at": self.run_at_ms,
        }
        # One test per option, in this order (a dict of all of them, filtered, took three
        # times as long, and most tasks set none).
        if self.max_attempts is not None:
            record["max_att"] = self.max_attempts
        if self.lease_ms is not None:
            record["lease_ms"] = self.lease_ms
        if self.run_ms is not None:
            record["run_ms"] = self.run_ms
        if self.traceparent is not None:
            record["tp"] = self.traceparent
        if self.tracestate is not None:
            record["ts"] = self.tracestate
        if self.dedup_key is not None:
            record["dk"] = self.dedup_key
        if self.singleton_key is not None:
            record["sk"] = self.singleton_key
        if self.depends_on:
            record["deps"] = list(self.depends_on)
        if self.cross_deps:
            record["xdeps"] = [list(x) for x in self.cross_deps]
        if self.results_from:
            record["rs"] = [list(x) for x in self.results_from]
        if self.group is not None:
            record["grp"] = self.group
        if self.after_group is not None:
            record["ag"] = self.after_group
        if self.capability is not None:
            record["cap"] = self.capability
        if self.owner is not None:
            record["own"] = self.owner
        if self.version is not None:
            record["ver"] = self.version
        if self.heartbeat_ms is not None:
            record["hbi"] = self.heartbeat_ms
        if self.notify is not None:
            record["nfy"] = self.notify
        if self.rate_key is not None:
            record["rk"] = self.rate_key
        if self.concurrency_key is not None:
            record["ck"] = self.concurrency_key
        if self.job is not None:
            record["jb"] = self.job
        if self.parent is not None:
            queue, parent_id, step = self.parent
            record["par"] = {"q": queue, "id": parent_id, "s": step}
        if self.cancel_on:
            record["co"] = [{"e": e, "m": m, "h": h} for e, m, h in self.cancel_on]
        if self.debounce is not None:
            record["dbk"], window, most = self.debounce
            record["fl"] = ["d", window, most]
        elif self.throttle is not None:
            _, window, limit, delay = self.throttle
            record["fl"] = ["t", window, limit, delay]
        return record


@dataclass(slots=True)
class Lease:
    """A task claimed for one attempt: what the dispatcher needs to push it. Never changed once
    made (:func:`dataclasses.replace` makes another), but not ``frozen``, as :class:`NewTask`:
    every task a claim leases is made here, 0.7 µs against 2.9 for the 20 fields set through
    ``object.__setattr__`` (timeit)."""

    queue: str
    task_id: str
    endpoint_id: str
    token: str
    name: str
    attempt: int
    max_attempts: int | None
    payload_json: str
    checkpoint_json: str | None
    expires_ms: int
    deadline_ms: int
    traceparent: str | None
    tracestate: str | None = None
    ready_ms: int = 0  # when it became due (its run_at), for time-in-queue metrics
    started_ms: int = 0  # when this claim leased it
    steps_json: str | None = None  # the durable steps' JSON list, for a task that has some
    version: str = ""
    # The endpoint's signing secrets at the claim's time: the current one, and the previous one
    # while its rotation's overlap lasts (claim.lua chooses them).
    secrets: tuple[str, ...] = ()
    # pass_results: (queue, id) of the dependencies whose results the push carries, and the
    # ``results`` JSON array fetched for them after the claim (gateway.store.passed_results).
    results_from: tuple[tuple[str, str], ...] = ()
    results_json: str | None = None


def attempt_from_record(raw: str | bytes) -> Attempt:
    a: dict[str, Any] = orjson.loads(raw)
    return Attempt(
        number=a["n"],
        endpoint_id=a.get("ep"),
        started_at=to_datetime(a["started"]),
        ended_at=to_datetime(a["ended"]),
        outcome=AttemptOutcome(a["outcome"]),
        http_status=a.get("status"),
        error=a.get("error"),
        traceback=a.get("tb"),
        failure=a.get("kind"),
        task_failure=a.get("tf", False),
    )


def steps_from_json(steps: str | None) -> list[TaskStep]:
    """A task's stored durable steps (step.lua's JSON list) as the API shows them."""
    if not steps:
        return []
    return [
        TaskStep(
            name=step["name"],
            result=step["result"],
            attempt=step["attempt"],
            recorded_at=to_datetime(step["recorded_ms"]),
            wait=_step_wait(step.get("wait")),
        )
        for step in json.loads(steps)
    ]


def _step_wait(mark: dict[str, Any] | None) -> StepWait | None:
    """How a wait's step says its wait ended (``wait_mark`` of ``lua/wait_helpers.lua``)."""
    if mark is None:
        return None
    since = mark.get("since_ms")
    child = TaskChild(queue=mark["queue"], id=mark["id"]) if "id" in mark else None
    call = StepCall(method=mark["method"], url=mark["url"]) if "url" in mark else None
    return StepWait(
        kind=mark["kind"],
        by=mark["by"],
        since=None if since is None else to_datetime(since),
        event=mark.get("event"),
        child=child,
        call=call,
    )


def final_error(record: Mapping[str, Any]) -> str | None:
    """The task's ``error``: its last failed attempt's while it may run again, its final
    outcome's once it ended; none once it succeeded (a record a version before this one left
    may still hold the error of an attempt before the success)."""
    return None if record["state"] == "succeeded" else record.get("error")


def wait_from_record(record: dict[str, Any]) -> TaskWait:
    """The wait for an event, a child or a call a record holds (``wt``: lua/wait_helpers.lua); it
    times out at the task's ``run_at``."""
    wt = record["wt"]
    until = to_datetime(record["run_at"])
    if wt.get("k") == "call":  # a wait for a durable HTTP call (lua/call.lua)
        request = json.loads(wt["q"])
        call = TaskCall(method=request["method"], url=request["url"], since=to_datetime(wt["r"]))
        return TaskWait(step=wt["s"], call=call, until=until)
    if "c" in wt:  # a wait for a child (lua/invoke.lua)
        return TaskWait(step=wt["s"], child=TaskChild(queue=wt["cq"], id=wt["c"]), until=until)
    return TaskWait(step=wt["s"], event=wt["e"], match=json.loads(wt["m"]), until=until)


def task_from_record(
    queue: str,
    task_id: str,
    record: dict[str, Any],
    policy: QueuePolicy,
    *,
    payload: str | bytes | None = None,
    result: str | bytes | None = None,
    checkpoint: str | bytes | None = None,
    steps: str | None = None,
    history: list[Attempt] | None = None,
    now_ms: int | None = None,
) -> Task:
    """Build the wire's task from a stored record; the running attempt is shown last. With
    ``now_ms``, a running task silent for longer than its heartbeat interval shows stalled."""
    state = TaskState(record["state"])
    attempts = list(history or [])
    if state is TaskState.RUNNING:
        attempts.append(
            Attempt(
                number=record["att"],
                endpoint_id=record.get("ep"),
                started_at=to_datetime(record["started"]),
                outcome=AttemptOutcome.RUNNING,
            )
        )
    started = record.get("started")
    finished = record.get("finished")
    expires = record.get("exp")
    heartbeat = record.get("hb")
    wait = record.get("wait")
    return Task(
        id=task_id,
        queue=queue,
        name=record["name"],
        payload=load_json(payload),
        priority=record["prio"],
        state=state,
        attempt=record["att"],
        max_attempts=record.get("max_att", policy.max_attempts),
        created_at=to_datetime(record["created"]),
        run_at=to_datetime(record["run_at"]),
        started_at=to_datetime(started) if started else None,
        finished_at=to_datetime(finished) if finished else None,
        lease_expires_at=to_datetime(expires) if expires else None,
        progress=record.get("progress"),
        cancel_requested=bool(record.get("cancel", False)),
        result=load_json(result),
        warning=record.get("warn"),
        error=final_error(record),
        checkpoint=load_json(checkpoint),
        steps=steps_from_json(steps),
        attempts=attempts,
        redrives=record.get("rd", 0),
        owner=record.get("own"),
        version=record.get("ver"),
        trace_id=record["tp"][3:35] if record.get("tp") else None,
        capability=record.get("cap"),
        dedup_key=record.get("dk"),
        singleton_key=record.get("sk"),
        concurrency_key=record.get("ck"),
        **({"flow": flow_from_record(record)} if "dbk" in record or "thd" in record else {}),
        group=record.get("grp"),
        depends_on=record.get("deps") or [],
        pass_results="rs" in record,
        after_group=record.get("ag"),
        waiting_on=wait if state is TaskState.WAITING and isinstance(wait, list) else [],
        **({"wait": wait_from_record(record)} if "wt" in record else {}),
        endpoint_id=record.get("ep"),
        last_heartbeat_at=to_datetime(heartbeat) if heartbeat else None,
        stalled=now_ms is not None and is_stalled(record, now_ms),
        notify=record.get("nfy"),
        notice=notice_from_record(record.get("ntc")),
    )


def flow_from_record(record: dict[str, Any]) -> TaskFlow:
    """What debounce or throttle did with a stored task: its debounce key and the enqueues
    merged into it (``dbk``, ``dbn``), or that a throttle delayed it (``thd``): lua/enqueue.lua.
    """
    if "thd" in record:
        return TaskFlow(throttled="delayed")
    return TaskFlow(debounce_key=record["dbk"], debounce_seq=record.get("dbn"))


def notice_from_record(ntc: dict[str, Any] | None) -> NoticeStatus | None:
    """A completion callback's delivery, from the ``ntc`` of a task record (``lua/prelude.lua``,
    ``record_notice``)."""
    if not ntc:
        return None
    state = NoticeState(ntc["st"])
    return NoticeStatus(
        state=state,
        tries=ntc.get("n", 0),
        last_error=ntc.get("le"),
        next_try_at=to_datetime(ntc["due"]) if state is NoticeState.PENDING else None,
        delivered_at=to_datetime(ntc["at"]) if ntc.get("at") else None,
    )


def is_stalled(record: dict[str, Any], now_ms: int) -> bool:
    """A running task whose last sign of life (heartbeat, or its start) is older than the
    heartbeat interval its attempt is held to."""
    interval = record.get("sti")
    if record.get("state") != TaskState.RUNNING or not interval:
        return False
    last = record.get("hb") or record.get("started") or now_ms
    return bool(now_ms - last > interval)
