"""An enqueue's answer is built straight from the new task, not read back from its record: it
must be the very Task that reading the stored record gives."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from gateway.services.enqueue.created import Created, answer_json, created_json, plain_json
from gateway.services.enqueue.created import created_view as _created_view
from gateway.services.enqueue.new_records import is_plain, new_plain_task, new_task
from gateway.store.records import NewTask, dump_json, task_from_record
from gateway.telemetry.tracing import TraceHeaders
from sdk.wire import (
    BatchCreated,
    BatchReceipt,
    KeyConcurrency,
    KeyRateLimit,
    QueuePolicy,
    TaskCreate,
    TaskReceipt,
    TaskState,
)

NOW = 1_763_887_000_123
DEP = "01KAQ2Z8X3J5N7P9R1T3V5X7Z9"
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

SPECS: list[dict[str, Any]] = [
    {"name": "noop"},
    {"name": "a.b:c-d_e", "payload": {"n": "{0}}"}, "priority": 1000},
    {"name": "noop", "payload": {"args": [1, 2.5, "x"], "kwargs": {"k": None}}},
    {
        "name": "full",
        "id": "01KAQ30000000000000000000A",
        "payload": [True, {"nested": ["ü", 1e-5]}],
        "priority": -7,
        "delay": 1.5,
        "max_attempts": 9,
        "lease_timeout": 12,
        "max_run_time": 60,
        "dedup_key": "d-1",
        "singleton_key": "s-1",
        "group": "g1",
        "capability": "gpu",
        "owner": "tenant-1",
        "version": "2.0",
        "max_heartbeat_interval": 5,
        "notify": "https://example.com/done",
        "traceparent": TRACEPARENT,
        "tracestate": "a=b",
    },
    {"name": "later", "run_at": datetime(2031, 1, 2, 3, 4, 5, 678_000, tzinfo=UTC)},
    {"name": "after", "depends_on": [DEP], "after_group": "g0"},
    {"name": "chained", "depends_on": [DEP], "pass_results": True},
    {"name": "limited", "throttle": {"key": "t", "window": 60, "limit": 3, "mode": "delay"}},
]


@pytest.mark.parametrize("fields", SPECS)
@pytest.mark.parametrize("state", [TaskState.QUEUED, TaskState.SCHEDULED, TaskState.WAITING])
@pytest.mark.parametrize("request_trace", [None, TraceHeaders(TRACEPARENT, "x=y")])
def test_the_answer_is_the_stored_record_read_back(
    fields: dict[str, Any], state: TaskState, request_trace: TraceHeaders | None
) -> None:
    policy = QueuePolicy(max_attempts=4, key_rate_limit=None)
    spec = TaskCreate.model_validate(fields)
    new = new_task(spec, NOW, {DEP: "elsewhere"}, "q", policy, request_trace)
    record = new.record()
    record.update(state=state.value, att=0)
    if state is TaskState.WAITING:
        record["wait"] = list(new.depends_on) + (
            [f"group:{new.after_group}"] if new.after_group else []
        )

    read_back = task_from_record("q", new.id, record, policy, payload=new.payload_json)
    built = _created_view("q", spec, new, state, policy)

    assert built == read_back
    assert built.model_dump_json() == read_back.model_dump_json()
    # The routes that answer JSON only write it without the model: the same bytes.
    written = built.model_dump_json().encode()
    assert orjson.dumps(created_json("q", new, state, policy)) == written
    assert orjson.dumps(plain_json("q", new, state, policy)) == written  # plain or not


def test_a_batch_answer_is_the_models_json_with_earlier_tasks_as_they_are() -> None:
    policy = QueuePolicy(max_attempts=4)
    specs = [TaskCreate.model_validate(fields) for fields in SPECS]
    news = [new_task(spec, NOW, {DEP: "elsewhere"}, "q", policy) for spec in specs]
    earlier = _created_view("q", specs[0], news[0], TaskState.SUCCEEDED, policy).model_copy(
        update={"deduplicated": True, "result": {"done": 1}}
    )
    created = [
        Created("q", s, n, TaskState.QUEUED, policy) for s, n in zip(specs, news, strict=True)
    ]
    created.append(Created("q", specs[0], news[0], earlier.state, policy, earlier))
    views = [c.view() for c in created]

    assert answer_json(created) == BatchCreated(tasks=views).model_dump_json().encode()
    assert views[-1] is earlier
    assert created[-1].id == earlier.id
    assert created[-1].finished

    # Prefer: return=minimal: each task is its full answer cut to TaskReceipt's fields, so a
    # field added to both (an enqueue's outcome) must be added to the one builder too.
    fields = set(TaskReceipt.model_fields)
    minimal = orjson.loads(answer_json(created, minimal=True))
    assert minimal == {"tasks": [view.model_dump(mode="json", include=fields) for view in views]}
    assert [t["deduplicated"] for t in minimal["tasks"]] == [False] * len(specs) + [True]
    assert BatchReceipt.model_validate(minimal).tasks[-1].state is TaskState.SUCCEEDED


def test_a_keyed_queue_answers_alike() -> None:
    policy = QueuePolicy(
        key_rate_limit=KeyRateLimit(path="kwargs.user", per_second=1, burst=1),
        key_concurrency=KeyConcurrency(limit=2, path="kwargs.user"),
    )
    spec = TaskCreate(name="keyed", payload={"kwargs": {"user": "u1"}})
    new = new_task(spec, NOW, {}, "q", policy)
    assert new.record()["ck"] == "u1"
    record = new.record()
    record.update(state="queued", att=0)
    read_back = task_from_record("q", new.id, record, policy, payload=new.payload_json)
    built = _created_view("q", spec, new, TaskState.QUEUED, policy)
    assert built == read_back
    assert built.concurrency_key == "u1"
    written = built.model_dump_json().encode()
    assert orjson.dumps(plain_json("q", new, TaskState.QUEUED, policy)) == written


@pytest.mark.parametrize(
    "value",
    [
        {"args": [], "kwargs": {}},
        [1, -2.5, 1e-05, 1.7976931348623157e308, True, None, 'ü\u2028"\\'],
        {"big": 10**30, "neg": -(10**25)},  # beyond 64 bits: orjson refuses, json does not
        "x",
        None,
    ],
)
def test_dump_json_is_compact_json_of_the_same_value(value: Any) -> None:
    text = dump_json(value)
    assert json.loads(text) == value
    assert " " not in text  # compact (no value here holds a space)


def test_pass_results_needs_depends_on() -> None:
    with pytest.raises(ValueError, match="pass_results needs depends_on"):
        TaskCreate(name="alone", pass_results=True)


@pytest.mark.parametrize("fields", [s for s in SPECS if set(s) <= {"name", "payload", "priority"}])
@pytest.mark.parametrize("request_trace", [None, TraceHeaders(TRACEPARENT, "x=y")])
def test_a_plain_task_is_made_as_any_other(
    fields: dict[str, Any], request_trace: TraceHeaders | None
) -> None:
    spec = TaskCreate.model_validate(fields)
    assert is_plain(spec, QueuePolicy())
    rated = KeyRateLimit(path="kwargs.user", per_second=1, burst=1)
    assert not is_plain(spec, QueuePolicy(key_rate_limit=rated))
    assert not is_plain(spec, QueuePolicy(key_concurrency=KeyConcurrency(limit=2, path="k")))
    made = new_plain_task(spec, NOW, request_trace, DEP)
    assert made == new_task(spec, NOW, {}, "q", QueuePolicy(), request_trace, DEP)


SAMPLE_VALUES = {
    "int | None": 7,
    "str | None": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    "tuple[str, ...]": (DEP,),
    "tuple[tuple[str, str], ...]": (("elsewhere", DEP),),
    "tuple[str, int, int] | None": ("doc-7", 30_000, 0),
    "tuple[str, int, int, bool] | None": ("acct-1", 60_000, 1, False),
    "tuple[tuple[str, str, str], ...]": (("paid", '{"order":7}', '["order"]'),),
    "tuple[str, str, str] | None": ("q", DEP, "child"),
}


@pytest.mark.parametrize(
    "field",
    [f for f in dataclasses.fields(NewTask) if f.default is not dataclasses.MISSING],
    ids=lambda f: f.name,
)
@pytest.mark.parametrize("state", [TaskState.QUEUED, TaskState.WAITING])
def test_every_option_of_anew_task_comes_out_in_the_answer_as_the_general_path_writes_it(
    field: dataclasses.Field[Any], state: TaskState
) -> None:
    """A field added to NewTask that the answer shows must also make the task not plain (or
    the format string, written for plain tasks, would leave it out)."""
    plain = new_plain_task(TaskCreate(name="noop", payload={"n": 1}), NOW, None, DEP)
    value = SAMPLE_VALUES[str(field.type)]
    optioned = dataclasses.replace(plain, **{field.name: value})
    policy = QueuePolicy(max_attempts=3)
    general = orjson.dumps(created_json("q", optioned, state, policy))
    assert orjson.dumps(plain_json("q", optioned, state, policy)) == general


def test_a_debounced_task_answers_as_stored() -> None:
    policy = QueuePolicy()
    spec = TaskCreate(name="burst", debounce={"key": "doc-7", "window": 30, "max_wait": 60})
    new = new_task(spec, NOW, {}, "q", policy)
    assert new.run_at_ms == NOW + 30_000
    record = new.record()
    record.update(state="scheduled", att=0, dbn=1)  # the enqueue script numbers the burst
    read_back = task_from_record("q", new.id, record, policy, payload=new.payload_json)
    assert _created_view("q", spec, new, TaskState.SCHEDULED, policy) == read_back


@pytest.mark.parametrize(
    "fields",
    [
        {"name": "noop", "depends_on": []},
        {"name": "noop", "payload": {"n": 1}, "priority": 0, "depends_on": [], "owner": None},
        {"name": "noop", "max_attempts": None, "traceparent": None, "debounce": None},
    ],
)
def test_a_task_giving_options_at_their_default_is_plain(fields: dict[str, Any]) -> None:
    """What a client that writes every field sends (an older SDK: ``"priority": 0,
    "depends_on": []``) takes the plain path, and makes the same task as the general one."""
    spec = TaskCreate.model_validate_json(json.dumps(fields), strict=True)
    assert spec.model_fields_set == set(fields)
    assert is_plain(spec, QueuePolicy())
    made = new_plain_task(spec, NOW, None, DEP)
    assert made == new_task(spec, NOW, {}, "q", QueuePolicy(), None, DEP)


@pytest.mark.parametrize(
    "fields",
    [
        {"name": "noop", "depends_on": [DEP]},
        {"name": "noop", "pass_results": False},
        {"name": "noop", "delay": 0},
        {"name": "noop", "max_attempts": 3},
    ],
)
def test_a_task_giving_an_option_off_its_default_is_not_plain(fields: dict[str, Any]) -> None:
    spec = TaskCreate.model_validate_json(json.dumps(fields), strict=True)
    assert not is_plain(spec, QueuePolicy())


RECORD_KEYS = {  # NewTask field → its key in the record (lua/prelude.lua)
    "max_attempts": "max_att",
    "lease_ms": "lease_ms",
    "run_ms": "run_ms",
    "traceparent": "tp",
    "tracestate": "ts",
    "dedup_key": "dk",
    "singleton_key": "sk",
    "depends_on": "deps",
    "cross_deps": "xdeps",
    "results_from": "rs",
    "group": "grp",
    "after_group": "ag",
    "capability": "cap",
    "owner": "own",
    "version": "ver",
    "heartbeat_ms": "hbi",
    "notify": "nfy",
    "rate_key": "rk",
    "concurrency_key": "ck",
    "job": "jb",
}


def _record_as_before(new: NewTask) -> dict[str, Any]:
    """The record as ``NewTask.record`` wrote it before it tested each option in turn."""
    record: dict[str, Any] = {
        "name": new.name,
        "prio": new.priority,
        "created": new.created_ms,
        "run_at": new.run_at_ms,
    }
    for field, key in RECORD_KEYS.items():
        value = getattr(new, field)
        if isinstance(value, tuple):
            value = [list(v) if isinstance(v, tuple) else v for v in value] or None
        if value is not None:
            record[key] = value
    if new.cancel_on:  # (added since: a list of objects)
        record["co"] = [{"e": e, "m": m, "h": h} for e, m, h in new.cancel_on]
    if new.parent is not None:  # (added since: an object)
        queue, parent_id, step = new.parent
        record["par"] = {"q": queue, "id": parent_id, "s": step}
    if new.debounce is not None:
        record["dbk"], window, most = new.debounce
        record["fl"] = ["d", window, most]
    elif new.throttle is not None:
        _, window, limit, delay = new.throttle
        record["fl"] = ["t", window, limit, delay]
    return record


@pytest.mark.parametrize(
    "field",
    [f for f in dataclasses.fields(NewTask) if f.default is not dataclasses.MISSING],
    ids=lambda f: f.name,
)
def test_each_option_goes_into_the_record_under_its_key(field: dataclasses.Field[Any]) -> None:
    plain = new_plain_task(TaskCreate(name="noop", payload={"n": 1}), NOW, None, DEP)
    assert (
        plain.record()
        == _record_as_before(plain)
        == {
            "name": "noop",
            "prio": 0,
            "created": NOW,
            "run_at": NOW,
        }
    )
    optioned = dataclasses.replace(plain, **{field.name: SAMPLE_VALUES[str(field.type)]})
    record = optioned.record()
    assert record == _record_as_before(optioned)
    assert list(record) == list(_record_as_before(optioned))  # the same JSON, key for key
    # Stored as sent, less prio at 0 and created equal to run_at (load_record puts them back).
    stored = {
        key: value
        for key, value in record.items()
        if not (key == "prio" and value == 0)
        and not (key == "created" and value == record["run_at"])
    }
    assert optioned.record_json() == dump_json(stored)
    assert len(record) > 4
