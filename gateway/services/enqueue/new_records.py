"""The new-record stage of an enqueue: each validated :class:`~sdk.wire.TaskCreate` made into the
:class:`~gateway.store.records.NewTask` the enqueue script stores (times in ms on the Redis
clock, keys read from the payload under the queue's policy), and the narrower path of a plain
task, which gives nothing but its id, name, payload and priority. :func:`new_records` makes a
batch's."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace

from ulid import ULID

from gateway.core.matching import canonical, shape_of
from gateway.core.rate_keys import rate_key_of
from gateway.store.records import NewTask, dump_json, seconds_to_ms, to_ms
from gateway.telemetry.tracing import TraceHeaders
from sdk.wire import KeyConcurrency, QueuePolicy, TaskCreate


def new_records(
    specs: Sequence[TaskCreate],
    now_ms: int,
    located: dict[str, str],
    queue: str,
    policy: QueuePolicy,
    trace: TraceHeaders | None,
    ids: Iterator[str],
    job: str | None,
    *,
    parent: tuple[str, str, str] | None = None,
    plain: bool = True,
) -> list[NewTask]:
    """Each task's new record, made at ``now_ms``; ``ids`` gives the id of each task that
    brings none, ``job`` names the job whose runs they are, ``parent`` the task that invoked
    them (queue, id, step). With ``plain``, a plain task
    (:func:`is_plain`) is made by :func:`new_plain_task`; without, every task by
    :func:`new_task` (the traced path, whose trace context the enqueue span sets)."""
    if plain:
        made = [
            new_plain_task(spec, now_ms, trace, spec.id or next(ids))
            if is_plain(spec, policy)
            else new_task(spec, now_ms, located, queue, policy, trace, spec.id or next(ids))
            for spec in specs
        ]
    else:
        made = [
            new_task(spec, now_ms, located, queue, policy, trace, task_id=spec.id or next(ids))
            for spec in specs
        ]
    made = runs_of(job, made)
    return made if parent is None else [replace(n, parent=parent) for n in made]


def new_task(
    spec: TaskCreate,
    now_ms: int,
    located: dict[str, str],
    queue: str,
    policy: QueuePolicy,
    trace: TraceHeaders | None = None,
    task_id: str | None = None,
) -> NewTask:
    """The task ``spec`` asks for, made at ``now_ms``: ``located`` gives the queue of each
    dependency outside the batch, ``trace`` the request's W3C headers (kept when the task
    brings no traceparent of its own)."""
    debounce = throttle = None
    if spec.run_at is not None:
        run_at = to_ms(spec.run_at)
    elif spec.delay:
        run_at = now_ms + seconds_to_ms(spec.delay)
    elif spec.debounce is not None:
        window = seconds_to_ms(spec.debounce.window)
        most = 0 if spec.debounce.max_wait is None else seconds_to_ms(spec.debounce.max_wait)
        debounce = (spec.debounce.key, window, most)
        run_at = now_ms + (min(window, most) if most else window)
    else:
        run_at = now_ms
    if spec.throttle is not None:
        t = spec.throttle
        throttle = (t.key, seconds_to_ms(t.window), t.limit, t.mode == "delay")
    return NewTask(
        id=spec.id or task_id or str(ULID()),
        name=spec.name,
        payload_json=dump_json(spec.payload),
        priority=spec.priority,
        created_ms=now_ms,
        run_at_ms=run_at,
        max_attempts=spec.max_attempts,
        lease_ms=None if spec.lease_timeout is None else seconds_to_ms(spec.lease_timeout),
        run_ms=None if spec.max_run_time is None else seconds_to_ms(spec.max_run_time),
        traceparent=spec.traceparent or (trace.traceparent if trace else None),
        tracestate=spec.tracestate if spec.traceparent else (trace.tracestate if trace else None),
        dedup_key=spec.dedup_key,
        singleton_key=spec.singleton_key,
        depends_on=tuple(spec.depends_on),
        cross_deps=tuple(
            (located[d], d) for d in spec.depends_on if located.get(d, queue) != queue
        ),
        results_from=tuple((located.get(d, queue), d) for d in spec.depends_on)
        if spec.pass_results
        else (),
        group=spec.group,
        after_group=spec.after_group,
        capability=spec.capability,
        owner=spec.owner,
        version=spec.version,
        heartbeat_ms=None
        if spec.max_heartbeat_interval is None
        else seconds_to_ms(spec.max_heartbeat_interval),
        notify=spec.notify,
        rate_key=None
        if policy.key_rate_limit is None
        else rate_key_of(spec.payload, policy.key_rate_limit.path),
        concurrency_key=_concurrency_key(spec, policy.key_concurrency),
        debounce=debounce,
        throttle=throttle,
        cancel_on=tuple(
            (c.event, canonical(c.match), shape_of(c.match)) for c in spec.cancel_on or ()
        ),
    )


def _concurrency_key(spec: TaskCreate, limit: KeyConcurrency | None) -> str | None:
    """The task's key under the queue's key_concurrency: its own, else the payload's value at
    the policy's path (as a rate key is read: gateway.core.rate_keys)."""
    if limit is None:
        return None
    if spec.concurrency_key is not None:
        return spec.concurrency_key
    return None if limit.path is None else rate_key_of(spec.payload, limit.path)


_PLAIN = frozenset({"id", "name", "payload", "priority"})
_DEFAULTS = {
    name: info.get_default(call_default_factory=True)
    for name, info in TaskCreate.model_fields.items()
}


def is_plain(spec: TaskCreate, policy: QueuePolicy) -> bool:
    """Whether the task gives nothing but its id, name, payload and priority (what most
    enqueues send) to a queue without keys read from payloads (per-key rate limits or
    concurrency): :func:`new_plain_task`'s. A field sent at its default (``"depends_on":
    []``, ``"max_attempts": null``: what a client that writes every field sends) is as good
    as not sent: :func:`new_task` reads values, never which fields were given."""
    if policy.key_rate_limit is not None or policy.key_concurrency is not None:
        return False
    given = spec.model_fields_set
    if given <= _PLAIN:
        return True
    return all(getattr(spec, name) == _DEFAULTS[name] for name in given - _PLAIN)


def new_plain_task(
    spec: TaskCreate, now_ms: int, trace: TraceHeaders | None, task_id: str
) -> NewTask:
    """:func:`new_task` for a plain task (:func:`is_plain`), skipping the twenty options it does
    not give: the same NewTask (a test holds them equal) in half the time."""
    return NewTask(
        id=spec.id or task_id,
        name=spec.name,
        payload_json=dump_json(spec.payload),
        priority=spec.priority,
        created_ms=now_ms,
        run_at_ms=now_ms,
        traceparent=trace.traceparent if trace else None,
        tracestate=trace.tracestate if trace else None,
    )


def runs_of(job: str | None, new: list[NewTask]) -> list[NewTask]:
    """The tasks as runs of ``job``: their records name it (``jb``)."""
    return new if job is None else [replace(n, job=job) for n in new]


def is_ready_now(spec: TaskCreate, now_ms: int) -> bool:
    """Whether the task goes straight to the ready set (no delay, no dependency)."""
    if spec.depends_on or spec.after_group or spec.delay or spec.debounce:
        return False
    return spec.run_at is None or to_ms(spec.run_at) <= now_ms
