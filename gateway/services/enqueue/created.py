"""An enqueue's answer: each task as stored, built from what was stored rather than read back.

:func:`created_view` makes the :class:`~sdk.wire.Task` model of a task just stored.
:func:`created_json` writes the same Task's JSON without the model: the routes that answer
nothing but the JSON (every batch, a single enqueue that does not wait) take it, because
building 40-field models and dumping them cost a batch enqueue of 1,000 small tasks about 13 µs
of the gateway's 34 per task, where a dict of the fields that differ, merged into the defaults
and written by orjson, costs a tenth of that. A test holds the two byte for byte equal.
Under ``Prefer: return=minimal`` (:mod:`gateway.api.prefer`) each task is answered with
:meth:`Created.receipt_value` instead: its id, state and whether it was deduplicated.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from pydantic import TypeAdapter

from gateway.store.records import NewTask, to_datetime
from sdk.wire import QueuePolicy, Task, TaskCreate, TaskFlow, TaskState

_DATETIME = TypeAdapter(datetime)


def _waiting_on(new: NewTask, state: TaskState) -> list[str]:
    if state is not TaskState.WAITING:
        return []
    return list(new.depends_on) + ([f"group:{new.after_group}"] if new.after_group else [])


def created_view(
    queue: str, spec: TaskCreate, new: NewTask, state: TaskState, policy: QueuePolicy
) -> Task:
    """The answer for a task just stored, built straight from what was stored: the same Task
    as reading its record back gives (``task_from_record``; a test holds them equal). Making
    the record, reading it and copying the view for the payload had cost a third of a batch
    enqueue's CPU."""
    return Task(
        id=new.id,
        queue=queue,
        name=new.name,
        payload=spec.payload,
        priority=new.priority,
        state=state,
        attempt=0,
        max_attempts=policy.max_attempts if new.max_attempts is None else new.max_attempts,
        created_at=to_datetime(new.created_ms),
        run_at=to_datetime(new.run_at_ms),
        owner=new.owner,
        version=new.version,
        trace_id=new.traceparent[3:35] if new.traceparent else None,
        capability=new.capability,
        dedup_key=new.dedup_key,
        singleton_key=new.singleton_key,
        concurrency_key=new.concurrency_key,
        group=new.group,
        depends_on=list(new.depends_on),
        pass_results=bool(new.results_from),
        after_group=new.after_group,
        waiting_on=_waiting_on(new, state),
        notify=new.notify,
        # Only a debounced task passes it: each field given costs its validation.
        **({} if new.debounce is None else {"flow": _made_flow(new.debounce[0])}),
    )


def _made_flow(debounce_key: str) -> TaskFlow:
    """The flow of a debounced task just made: the first enqueue of its burst."""
    return TaskFlow(debounce_key=debounce_key, debounce_seq=1)


@functools.lru_cache(maxsize=256)
def _time(ms: int) -> str:
    """A time as pydantic writes a Task's date-times (cached: a batch's tasks share them)."""
    written: str = _DATETIME.dump_python(to_datetime(ms), mode="json")
    return written


@functools.cache
def _defaults() -> dict[str, Any]:
    """Every field of a Task's JSON, in the model's order, with its default value (those this
    module sets have placeholders): a field added to Task comes out with its default."""
    epoch = to_datetime(0)
    blank = Task(
        id="",
        queue="",
        name="",
        state=TaskState.QUEUED,
        max_attempts=1,
        created_at=epoch,
        run_at=epoch,
    )
    defaults: dict[str, Any] = orjson.loads(blank.model_dump_json())
    return defaults


def created_json(queue: str, new: NewTask, state: TaskState, policy: QueuePolicy) -> dict[str, Any]:
    """:func:`created_view`'s Task as the value orjson writes to the same JSON: the payload
    goes in as the JSON it was stored as (``new.payload_json``), not parsed again."""
    return {
        **_defaults(),
        "id": new.id,
        "queue": queue,
        "name": new.name,
        "payload": orjson.Fragment(new.payload_json),
        "priority": new.priority,
        "state": state.value,
        "owner": new.owner,
        "version": new.version,
        "trace_id": new.traceparent[3:35] if new.traceparent else None,
        "capability": new.capability,
        "dedup_key": new.dedup_key,
        "singleton_key": new.singleton_key,
        "concurrency_key": new.concurrency_key,
        "group": new.group,
        "depends_on": list(new.depends_on),
        "pass_results": bool(new.results_from),
        "after_group": new.after_group,
        "waiting_on": _waiting_on(new, state),
        "max_attempts": policy.max_attempts if new.max_attempts is None else new.max_attempts,
        "created_at": _time(new.created_ms),
        "run_at": _time(new.run_at_ms),
        "notify": new.notify,
        "flow": None
        if new.debounce is None
        else orjson.Fragment(_made_flow(new.debounce[0]).model_dump_json()),
    }


def _plain(new: NewTask) -> bool:
    """Whether the task sets none of the Task's fields but its id, name, payload, priority and
    times (what most enqueues send): its JSON is :func:`_plain_format`'s."""
    return (
        new.max_attempts is None
        and new.traceparent is None
        and new.owner is None
        and new.version is None
        and new.capability is None
        and new.dedup_key is None
        and new.singleton_key is None
        and new.concurrency_key is None
        and new.group is None
        and not new.depends_on
        and not new.results_from
        and new.after_group is None
        and new.notify is None
        and new.debounce is None
    )


_MARKS = {  # what the sample task's JSON holds, and the format field each becomes
    "@ID@": "{0}",
    "@NAME@": "{1}",
    '@PAYLOAD@,"priority":0,': '{2},"priority":{3},',
    _time(0): "{4}",
    _time(1): "{5}",
}
_SAMPLE = NewTask(
    id="@ID@", name="@NAME@", payload_json="@PAYLOAD@", priority=0, created_ms=0, run_at_ms=1
)


@functools.lru_cache(maxsize=256)
def _plain_format(queue: str, state: TaskState, max_attempts: int) -> str:
    """A plain task's JSON (:func:`_plain`) as a format string of its id, name, payload JSON,
    priority, created_at and run_at: written once per queue, state and max_attempts by
    :func:`created_json` itself, so the two cannot differ. Ids, task names, queue names and
    times need no JSON escaping (their patterns allow no quote, backslash or control)."""
    policy = QueuePolicy(max_attempts=max_attempts)
    written = orjson.dumps(created_json(queue, _SAMPLE, state, policy)).decode()
    written = written.replace("{", "{{").replace("}", "}}")
    for mark, field in _MARKS.items():
        assert written.count(mark) == 1, mark
        written = written.replace(mark, field)
    return written


def plain_json(queue: str, new: NewTask, state: TaskState, policy: QueuePolicy) -> Any:
    """:func:`created_json`, for a plain task (:func:`_plain`) from its format string: a
    fraction of the time, and the same bytes (a test holds them equal)."""
    if not _plain(new):
        return created_json(queue, new, state, policy)
    written = _plain_format(queue, state, policy.max_attempts).format(
        new.id,
        new.name,
        new.payload_json,
        new.priority,
        _time(new.created_ms),
        _time(new.run_at_ms),
    )
    return orjson.Fragment(written)


@dataclass(slots=True)  # not frozen: every task of a batch makes one (2.0 -> 0.4 µs)
class Created:
    """One task of an enqueue's answer: a task stored as sent (``earlier`` and ``flowed``
    None), whose Task is made only when asked for; the earlier task its dedup or singleton key
    matched (``earlier``); or the Task made from what the store returned (``flowed``: the
    pending task its debounce replaced the payload of, the task a dropped enqueue's window let
    through, a task stored delayed to the next window, or one whose dependencies the script
    or its link decided: :mod:`gateway.services.enqueue.answers`)."""

    queue: str
    spec: TaskCreate
    new: NewTask
    state: TaskState
    policy: QueuePolicy
    earlier: Task | None = None
    flowed: Task | None = None

    @property
    def shown(self) -> Task | None:
        """The answer's Task when it is made already."""
        return self.earlier if self.earlier is not None else self.flowed

    @property
    def id(self) -> str:
        shown = self.shown
        return self.new.id if shown is None else shown.id

    @property
    def deduplicated(self) -> bool:
        return self.earlier is not None

    @property
    def stored_new(self) -> bool:
        """Whether this enqueue stored a task (201), rather than matching, replacing into or
        being dropped for another (200)."""
        if self.earlier is not None:
            return False
        flow = self.flowed.flow if self.flowed is not None else None
        return not (flow is not None and (flow.replaced or flow.throttled == "dropped"))

    @property
    def finished(self) -> bool:
        shown = self.shown
        return shown is not None and shown.state.finished

    def view(self) -> Task:
        shown = self.shown
        if shown is not None:
            return shown
        return created_view(self.queue, self.spec, self.new, self.state, self.policy)

    def json_value(self) -> Any:
        """What orjson writes as this task's JSON."""
        shown = self.shown
        if shown is not None:
            return orjson.Fragment(shown.model_dump_json())
        return plain_json(self.queue, self.new, self.state, self.policy)

    def receipt_value(self) -> dict[str, Any]:
        """What orjson writes as this task's :class:`~sdk.wire.TaskReceipt` (the answer under
        ``Prefer: return=minimal``): :meth:`json_value`'s Task cut to TaskReceipt's fields,
        without making that Task. The one place a receipt is built: a field added to
        TaskReceipt (an outcome that tells enqueues apart) is added here, and a test holding
        this equal to the full answer's fields fails until it is."""
        new = self.new
        if self.earlier is None and self.flowed is None and new.debounce is None:
            return {"id": new.id, "state": self.state.value, "deduplicated": False, "flow": None}
        shown = self.shown
        if shown is not None:
            flow = None if shown.flow is None else shown.flow.model_dump(mode="json")
            return {
                "id": shown.id,
                "state": shown.state.value,
                "deduplicated": shown.deduplicated,
                "flow": flow,
            }
        made = None if self.new.debounce is None else _made_flow(self.new.debounce[0])
        return {
            "id": self.new.id,
            "state": self.state.value,
            "deduplicated": False,
            "flow": None if made is None else made.model_dump(mode="json"),
        }


def answer_json(created: list[Created], *, minimal: bool = False) -> bytes:
    """A batch enqueue's answer as JSON: ``BatchCreated``, or with ``minimal`` (``Prefer:
    return=minimal``) ``BatchReceipt``."""
    if minimal:
        return orjson.dumps({"tasks": [c.receipt_value() for c in created]})
    return orjson.dumps({"tasks": [c.json_value() for c in created]})
