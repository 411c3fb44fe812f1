"""Waits for an event and cancel_on in Redis (docs/durable.md, "Waiting for an event"): the
``wait`` script (a finish that also records the wait: ``lua/wait.lua``), the ``resume`` script
an event runs on each queue that may have waits for it (``lua/resume.lua``), the queue's shapes
of matches for an event name, and the global sets ``jg:waits:<event>`` of those queues.

The index itself (``waits``, ``wait_shapes``, the records' ``wt`` and ``co``) is described in
``lua/wait_helpers.lua``; what it means for events and tasks, in ``gateway.services.waits``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, cast

from redis.asyncio import Redis

from gateway.store import keys
from gateway.store.keys import QueueKeys
from gateway.store.notices import mark as mark_noticed
from gateway.store.scripts import Arg
from gateway.store.tasks.base import StoreBase
from gateway.store.tasks.finish_reply import Finished, read_finished, read_markers
from gateway.store.tasks.finish_words import Finish, finish_keys, finish_words


@dataclass(frozen=True, slots=True)
class Wait:
    """A wait for an event as the ``wait`` script records it: the step its event (or null) is
    recorded as, the event's name, the canonical match and its shape
    (:mod:`gateway.core.matching`), and the lookback in ms."""

    step: str
    event: str
    match: str
    shape: str
    lookback_ms: int


@dataclass(frozen=True, slots=True)
class Touch:
    """What the resume script did, or asks the caller to do, to one task: ``resumed`` its
    wait (``step`` names it), or ``cancel`` it (a cancel_on entry)."""

    what: Literal["resumed", "cancel"]
    task_id: str
    step: str = ""


async def mark_waits(redis: Redis, queue: str, events: Iterable[str]) -> None:
    """Add ``queue`` to ``jg:waits:<event>`` of each event name (one command each: the sets
    live on other slots)."""
    async with redis.pipeline(transaction=False) as pipe:
        for event in events:
            pipe.sadd(keys.event_waits(event), queue)
        await pipe.execute()


class Waiting(StoreBase):
    """Waits for events and the index events read."""

    async def wait(self, queue: str, finish: Finish, wait: Wait, now_ms: int) -> Finished:
        """End an attempt as ``finish`` says (released, its delay the wait's timeout) and,
        when that leaves the task scheduled, record ``wait`` on it and in the queue's index, in
        one script (``lua/wait.lua``)."""
        k = QueueKeys.of(queue)
        script_keys = [*finish_keys(queue).words, k.waits, k.wait_shapes]
        head = (now_ms, keys.DONE_CHANNEL_PREFIX, queue, keys.WAKE_CHANNEL, queue)
        args: list[Arg] = [*head, *finish_words([finish]).words]
        args += (wait.step, wait.event, wait.match, wait.shape, wait.lookback_ms)
        replies = await self._scripts.call("wait", script_keys, args)
        _, _, noticed = read_markers(replies, 1)
        if noticed:  # it ended cancelled, with a completion callback to deliver
            await mark_noticed(self._redis, queue, now_ms)
        return read_finished(replies[0])

    async def mark_waits(self, queue: str, events: Iterable[str]) -> None:
        """Add ``queue`` to ``jg:waits:<event>`` of each event name (:func:`mark_waits`)."""
        await mark_waits(self._redis, queue, events)

    async def waiting_queues(self, event: str) -> list[str]:
        """The queues whose index may hold waits or cancel_on entries for ``event``."""
        return sorted(cast(set[str], await self._redis.smembers(keys.event_waits(event))))

    async def wait_shapes(self, queue: str, event: str) -> list[str]:
        """The shapes of the matches waiting on ``event`` in ``queue``."""
        raw = cast(str | None, await self._redis.hget(QueueKeys.of(queue).wait_shapes, event))
        return [] if raw is None else list(json.loads(raw))

    async def resume(
        self,
        queue: str,
        event: str,
        accepted_ms: int,
        result_json: str,
        fields: list[str],
        now_ms: int,
        only: str = "",
    ) -> list[Touch]:
        """Run ``lua/resume.lua`` for an event named ``event`` accepted at ``accepted_ms``
        (``result_json``: the step's result, ``{id, name, data}``) over the index ``fields``
        its data matches; ``only``: that task alone. Returns each task resumed, and each task
        a cancel_on entry asks to cancel (the caller cancels it)."""
        k = QueueKeys.of(queue)
        reply = await self._scripts.call(
            "resume",
            [
                k.policy,
                k.meta,
                k.steps,
                k.scheduled,
                k.ready,
                k.seq,
                k.key_counts,
                k.waits,
                k.wait_shapes,
            ],
            [now_ms, event, accepted_ms, result_json, keys.WAKE_CHANNEL, queue, only, *fields],
        )
        touched = []
        for kind, value in zip(reply[::2], reply[1::2], strict=True):
            if kind == "w":
                task_id, step = value.split(" ", 1)
                touched.append(Touch("resumed", task_id, step))
            else:
                touched.append(Touch("cancel", value))
        return touched
