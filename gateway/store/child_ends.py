"""Ends of invoked children, carried to their parents (docs/durable.md, "Invoking a task").

The script that ends a task a parent invoked (its record has ``par``) appends its end to its
own queue's ``outbox`` (``record_child_end`` in ``lua/prelude.lua``): ``{"ch": child id, "pq":
the parent's queue, "p": the parent's id, "s": the parent's step, "st": the child's final state,
"r": its result JSON when it succeeded, "e": its error}``. The recoverer delivers it with the
queue's other notices (:meth:`DependencyStore.deliver`) to the parent's queue, wherever that
lives, through ``lua/resume_child.lua``, which resumes the parent only while it still waits for
that child: delivered twice, it resumes it once.

The step's result (:func:`step_result`): ``{"state": "succeeded", "id": child id, "result":
its result}``, or ``{"state": "failed" | "dead" | "cancelled", "id", "error"}``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from gateway.store import keys
from gateway.store.keys import QueueKeys
from gateway.store.scripts import Scripts


def is_child_end(notice: Any) -> bool:
    """Whether an outbox entry is a child's end."""
    return isinstance(notice, dict) and "ch" in notice


def step_result(state: str, child_id: str, result: str | None, error: str | None) -> str:
    """The JSON a parent's invoke step records for its child's end."""
    head = f'{{"state":{json.dumps(state)},"id":{json.dumps(child_id)}'
    if state == "succeeded":
        return f'{head},"result":{result or "null"}}}'
    return f'{head},"error":{json.dumps(error or state, ensure_ascii=False)}}}'


async def resume_parent(
    scripts: Scripts, queue: str, parent_id: str, child_id: str, result: str, now_ms: int
) -> bool:
    """Resume task ``parent_id`` of ``queue`` with ``result`` when it still waits for
    ``child_id`` (``lua/resume_child.lua``); True when it did."""
    k = QueueKeys.of(queue)
    resumed = await scripts.call(
        "resume_child",
        [k.policy, k.meta, k.steps, k.scheduled, k.ready, k.seq, k.key_counts],
        [now_ms, parent_id, child_id, result, keys.WAKE_CHANNEL, queue],
    )
    return bool(resumed)


async def deliver_child_ends(scripts: Scripts, ends: Sequence[dict[str, Any]], now_ms: int) -> int:
    """Resume the parent of each end (an outbox entry); returns how many were resumed."""
    resumed = 0
    for end in ends:
        result = step_result(str(end["st"]), str(end["ch"]), end.get("r"), end.get("e"))
        resumed += await resume_parent(
            scripts, str(end["pq"]), str(end["p"]), str(end["ch"]), result, now_ms
        )
    return resumed
