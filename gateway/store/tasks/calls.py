"""Durable HTTP calls in Redis (docs/durable.md, "A durable HTTP call"): the ``call`` script (a
finish that also records the wait for the call and the call's lease: ``lua/call.lua``), the
renewal of a call's lease, the claim of expired ones (``lua/claim_calls.lua``) and the resume
(``lua/resume_call.lua``). Who makes the calls: :mod:`gateway.dispatch.calls`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from gateway.store import keys
from gateway.store.keys import QueueKeys
from gateway.store.notices import mark as mark_noticed
from gateway.store.scripts import Arg
from gateway.store.tasks.base import StoreBase
from gateway.store.tasks.finish_reply import Finished, read_finished, read_markers
from gateway.store.tasks.finish_words import Finish, finish_keys, finish_words


@dataclass(frozen=True, slots=True)
class CallWait:
    """A wait for a call as the ``call`` script records it: the step, the request (CallIn's
    JSON), the call's first lease expiry (ms), the step's result should the backstop come
    first (JSON), and one try's timeout (ms)."""

    step: str
    request: str
    lease_until_ms: int
    timed_out: str
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class ClaimedCall:
    """A call to make: its queue, task, step, request (CallIn's JSON) and lease expiry."""

    queue: str
    task_id: str
    step: str
    request: str
    lease_until_ms: int


class Calling(StoreBase):
    """Waits for durable HTTP calls, their leases and their ends."""

    async def call(self, queue: str, finish: Finish, wait: CallWait, now_ms: int) -> Finished:
        """End an attempt as ``finish`` says (released, its delay the backstop) and, when that
        leaves the task scheduled, record ``wait`` on it and the call's lease in the queue's
        ``calls``, in one script (``lua/call.lua``)."""
        head = (now_ms, keys.DONE_CHANNEL_PREFIX, queue, keys.WAKE_CHANNEL, queue)
        args: list[Arg] = [*head, *finish_words([finish]).words]
        args += (wait.step, wait.request, wait.lease_until_ms, wait.timed_out, wait.timeout_ms)
        script_keys = [*finish_keys(queue).words, QueueKeys.of(queue).calls]
        replies = await self._scripts.call("call", script_keys, args)
        _, _, noticed = read_markers(replies, 1)
        if noticed:  # it ended cancelled, with a completion callback to deliver
            await mark_noticed(self._redis, queue, now_ms)
        return read_finished(replies[0])

    async def renew_call(self, queue: str, task_id: str, until_ms: int) -> bool:
        """Move the lease of ``task_id``'s call to ``until_ms``; False when the call is no
        longer there (resumed, timed out, cancelled): then there is nothing to make."""
        calls = QueueKeys.of(queue).calls
        await self._redis.zadd(calls, {task_id: until_ms}, xx=True)  # (never adds it back)
        return await self._redis.zscore(calls, task_id) is not None

    async def claim_calls(
        self, queue: str, now_ms: int, limit: int, grace_ms: int
    ) -> list[ClaimedCall]:
        """The calls of ``queue`` whose lease expired by ``now_ms`` (at most ``limit``), each
        leased again (``lua/claim_calls.lua``)."""
        k = QueueKeys.of(queue)
        flat = cast(
            list[str],
            await self._scripts.call("claim_calls", [k.calls, k.meta], [now_ms, limit, grace_ms]),
        )
        return [
            ClaimedCall(queue, flat[i], flat[i + 1], flat[i + 2], int(flat[i + 3]))
            for i in range(0, len(flat), 4)
        ]

    async def resume_call(
        self, queue: str, task_id: str, step: str, result_json: str, now_ms: int
    ) -> bool:
        """Resume ``task_id`` with ``result_json`` as the step's result when it still waits
        for its call in ``step`` (``lua/resume_call.lua``); True when it did."""
        k = QueueKeys.of(queue)
        resumed = await self._scripts.call(
            "resume_call",
            [k.policy, k.meta, k.steps, k.scheduled, k.ready, k.seq, k.key_counts, k.calls],
            [now_ms, task_id, step, result_json, keys.WAKE_CHANNEL, queue],
        )
        return bool(resumed)
