"""Dependencies between queues: what cannot be one script, because two queues live on two slots.

Within one queue, the enqueue, finish and cancel scripts settle dependents themselves. Across
queues, a dependency is kept in two steps, each atomic and each safe to repeat:

1. **Link.** The enqueue script stores the waiting task and records ``"<id> <queue> <dep>"`` in
   its queue's ``links``. :meth:`DependencyStore.link` then registers the task as a dependent of
   ``dep`` in ``dep``'s queue (``link.lua``); if ``dep`` ended already, it settles the task at
   once (``resolve.lua``). Only then is the ``links`` entry dropped, so a gateway that dies in
   between leaves the entry for the recoverer to link again (:meth:`relink`).
2. **Notify.** When ``dep`` ends, its queue's finish (or cancel) script appends a notice to that
   queue's ``outbox``; :meth:`deliver` hands the notices to ``resolve.lua`` of each waiting
   task's queue and then drops them (``ack_outbox.lua``), so a crash delivers them again.

Settling is idempotent (a dependency no longer awaited changes nothing), so a repeat of either
step is harmless. The same outbox carries the ends of job runs to their jobs' keys
(:mod:`gateway.store.run_ends`), the ends of invoked children to their parents
(:mod:`gateway.store.child_ends`), the enqueues of invoked children and the cancels of the
children of cancelled parents (handed to :attr:`DependencyStore.on_invoke`:
:mod:`gateway.services.invokes`), delivered and dropped with the notices.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from redis.asyncio import Redis

from gateway.store import keys
from gateway.store.child_ends import deliver_child_ends, is_child_end
from gateway.store.keys import QueueKeys
from gateway.store.notices import mark as mark_noticed
from gateway.store.run_ends import RunEnd, keep_ends, run_end_notice
from gateway.store.scripts import Scripts

OUTBOX_BATCH = 200

log = logging.getLogger(__name__)

Invoked = Callable[[Sequence[dict[str, Any]]], Awaitable[None]]
"""What enqueues invoked children (outbox entries ``{"inv": ...}``) and cancels the children of
cancelled parents (``{"cc": ...}``)."""


class DependencyStore:
    def __init__(self, redis: Redis, scripts: Scripts) -> None:
        self._redis = redis
        self._scripts = scripts
        # Set by the app once the task service exists (gateway.services.invokes); raising
        # leaves the outbox to the next delivery.
        self.on_invoke: Invoked | None = None

    async def link(self, queue: str, links: Sequence[tuple[str, str, str]], now_ms: int) -> None:
        """Register each waiting task ``(id, dependency's queue, dependency)`` of ``queue``
        with its dependency, then drop its ``links`` entry."""
        notices: list[tuple[str, str, bool, str]] = []
        for task_id, dep_queue, dep in links:
            dk = QueueKeys.of(dep_queue)
            reply = await self._scripts.call(
                "link", [dk.meta, dk.dependents], [dep, queue, task_id]
            )
            if reply[0] == "ENDED":
                notices.append((task_id, dep, reply[1] == "succeeded", str(reply[2])))
            elif reply[0] == "NOTASK":
                notices.append((task_id, dep, False, "it no longer exists"))
        await self.resolve(queue, notices, now_ms)
        if links:
            await self._redis.zrem(QueueKeys.of(queue).links, *(" ".join(x) for x in links))

    async def resolve(
        self, queue: str, notices: Sequence[tuple[str, str, bool, str]], now_ms: int
    ) -> int:
        """Settle waiting tasks of ``queue``: ``(id, dependency, succeeded, reason)`` each."""
        if not notices:
            return 0
        k = QueueKeys.of(queue)
        args: list[str | int] = [now_ms, keys.DONE_CHANNEL_PREFIX, queue, keys.WAKE_CHANNEL]
        for task_id, dep, ok, reason in notices:
            args += [task_id, dep, "1" if ok else "0", reason]
        changed, noticed = await self._scripts.call(
            "resolve",
            [
                k.policy,
                k.meta,
                k.ready,
                k.seq,
                k.scheduled,
                k.waiting,
                k.dependents,
                k.groups,
                k.outbox,
                k.failed,
                k.dead,
                k.notify,
                k.key_counts,
            ],
            args,
        )
        if noticed:  # a completion callback notice was recorded
            await mark_noticed(self._redis, queue, now_ms)
        return int(changed)

    async def deliver(self, queue: str, now_ms: int) -> int:
        """Deliver the notices in ``queue``'s outbox, and the ends of job runs it holds
        (:mod:`gateway.store.run_ends`); returns how many were delivered."""
        outbox = QueueKeys.of(queue).outbox
        raw = cast(list[str], await self._redis.lrange(outbox, 0, OUTBOX_BATCH - 1))
        if not raw:
            return 0
        by_queue: dict[str, list[tuple[str, str, bool, str]]] = defaultdict(list)
        ends: list[RunEnd] = []
        child_ends: list[dict[str, Any]] = []
        invokes: list[dict[str, Any]] = []
        for notice in raw:
            found = json.loads(notice)
            end = run_end_notice(found)
            if end is not None:
                ends.append(end)
                continue
            if is_child_end(found):
                child_ends.append(found)
                continue
            if isinstance(found, dict) and ("inv" in found or "cc" in found):
                invokes.append(found)
                continue
            target, task_id, dep, ok, reason = found
            by_queue[target].append((task_id, dep, bool(ok), str(reason)))
        for target, notices in by_queue.items():
            await self.resolve(target, notices, now_ms)
        await keep_ends(self._scripts, ends)
        if invokes and self.on_invoke is not None:
            await self.on_invoke(invokes)
        elif invokes:
            log.warning("%d invoked children not handled: no task service here", len(invokes))
        await deliver_child_ends(self._scripts, child_ends, now_ms)
        await self._scripts.call("ack_outbox", [outbox], [raw[0], len(raw)])
        return len(raw)

    async def relink(self, queue: str, older_than_ms: int, now_ms: int) -> int:
        """Link again the cross-queue dependencies recorded before ``older_than_ms`` and still
        not registered (their gateway stopped between enqueue and link)."""
        members = cast(
            list[str],
            await self._redis.zrangebyscore(
                QueueKeys.of(queue).links, "-inf", older_than_ms, 0, OUTBOX_BATCH
            ),
        )
        links = []
        for m in members:
            task_id, dep_queue, dep = m.split(" ")
            links.append((task_id, dep_queue, dep))
        await self.link(queue, links, now_ms)
        return len(links)
