"""Dependencies' results for tasks enqueued with ``pass_results`` (chains and chords).

The claim script knows nothing of them: a dependency may live in another queue, on another
Cluster slot, which one script cannot reach. So after a claim, the leases whose record lists
dependencies to pass (``rs``) get their results read here, one ``HMGET`` per dependency queue,
and the push body carries them (``results``). A claim of tasks that do not ask costs one
dictionary lookup per lease more, and no round trip.

The results are assembled as JSON text around the stored results, never parsed. At most
``MAX_PASSED_RESULTS`` bytes of them travel in one push: a result that would go past it is
sent as ``{"id": ..., "result": null, "truncated": true}`` (the SDK fails the task with a
clear reason). A result swept with its task after the queue's retention is sent as null.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from json.encoder import encode_basestring_ascii as quoted
from typing import cast

from redis.asyncio import Redis

from gateway.store.keys import QueueKeys
from sdk.wire.pushes import MAX_PASSED_RESULTS


def results_json(
    sources: Sequence[tuple[str, str]],
    found: dict[tuple[str, str], str | None],
    cap: int = MAX_PASSED_RESULTS,
) -> str:
    """The ``results`` JSON array: one entry per ``(queue, id)`` of ``sources``, in order, with
    its stored result JSON from ``found`` (None: gone), truncated past ``cap`` bytes in all."""
    entries = []
    used = 0
    for source in sources:
        raw = found.get(source)
        task_id = quoted(source[1])
        if raw is not None and used + len(raw) > cap:
            entries.append(f'{{"id":{task_id},"result":null,"truncated":true}}')
            continue
        used += len(raw or "")
        entries.append(f'{{"id":{task_id},"result":{raw or "null"}}}')
    return f"[{','.join(entries)}]"


async def fetch_results(redis: Redis, wanted: Sequence[Sequence[tuple[str, str]]]) -> list[str]:
    """The ``results`` JSON of each list of ``(queue, id)`` in ``wanted``, read with one
    ``HMGET`` per queue for all of them."""
    by_queue: dict[str, list[str]] = defaultdict(list)
    for sources in wanted:
        for queue, task_id in sources:
            by_queue[queue].append(task_id)
    found: dict[tuple[str, str], str | None] = {}
    for queue, ids in by_queue.items():
        unique = list(dict.fromkeys(ids))
        values = cast(list[str | None], await redis.hmget(QueueKeys.of(queue).result, unique))
        found.update(((queue, i), v) for i, v in zip(unique, values, strict=True))
    return [results_json(sources, found) for sources in wanted]
