"""Invoked children in Redis (docs/durable.md, "Invoking a task"): the ``invoke`` script (a
finish that also records the wait for the child and puts its enqueue in the outbox:
``lua/invoke.lua``), and the ``resume_child`` script a child's end runs on its parent's queue
(``lua/resume_child.lua``). What they mean for tasks: :mod:`gateway.services.invokes`."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.store import keys
from gateway.store.child_ends import resume_parent
from gateway.store.notices import mark as mark_noticed
from gateway.store.scripts import Arg
from gateway.store.tasks.base import StoreBase
from gateway.store.tasks.finish_reply import Finished, read_finished, read_markers
from gateway.store.tasks.finish_words import Finish, finish_keys, finish_words


@dataclass(frozen=True, slots=True)
class ChildWait:
    """A wait for a child as the ``invoke`` script records it: the parent's step, the child's
    queue and id, the step's result should the timeout come first (JSON), and the outbox
    entry that enqueues the child (JSON)."""

    step: str
    queue: str
    child_id: str
    timed_out: str
    enqueue: str


class Invoking(StoreBase):
    """Waits for children, and their ends."""

    async def invoke(self, queue: str, finish: Finish, wait: ChildWait, now_ms: int) -> Finished:
        """End an attempt as ``finish`` says (released, its delay the timeout) and, when that
        leaves the task scheduled, record ``wait`` on it and the child's enqueue in the
        queue's outbox, in one script (``lua/invoke.lua``)."""
        head = (now_ms, keys.DONE_CHANNEL_PREFIX, queue, keys.WAKE_CHANNEL, queue)
        args: list[Arg] = [*head, *finish_words([finish]).words]
        args += (wait.step, wait.queue, wait.child_id, wait.timed_out, wait.enqueue)
        replies = await self._scripts.call("invoke", list(finish_keys(queue).words), args)
        _, _, noticed = read_markers(replies, 1)
        if noticed:  # it ended cancelled, with a completion callback to deliver
            await mark_noticed(self._redis, queue, now_ms)
        return read_finished(replies[0])

    async def resume_child(
        self, queue: str, parent_id: str, child_id: str, result_json: str, now_ms: int
    ) -> bool:
        """Resume task ``parent_id`` of ``queue`` with ``result_json`` as its step's result
        when it still waits for ``child_id`` (:func:`gateway.store.child_ends.resume_parent`)."""
        return await resume_parent(self._scripts, queue, parent_id, child_id, result_json, now_ms)
