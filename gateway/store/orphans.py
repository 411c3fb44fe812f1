"""The repair of durable steps left without their task by earlier versions.

Every script that deletes a task record (the sweep, ``clean``, queue deletion) deletes its steps
(``jg:{q}:steps``, field = task id) in the same script. Versions before that deleted them in the
round trip after the sweep's or clean's script, and a gateway stopped in between left the steps
for ever: no expiry, up to ``MAX_STEPS_BYTES`` (1 MiB) a task. :class:`StepsRepair` drops
them: it walks each queue's steps hash a few fields at a time (``lua/orphan_steps.lua``, which
checks each field against the queue's records and drops those without one in the same script,
so a task stored meanwhile is never taken for gone). The recoverer runs a pass with the id
index's repair, in the same turn (hourly, one gateway a pass among all).

Nothing new leaves such fields, so once no gateway older than this one writes to the Redis and
a pass has run, passes find nothing; they cost one script call per ``count`` fields of steps.
"""

from __future__ import annotations

from collections.abc import Iterable

from gateway.store.keys import QueueKeys
from gateway.store.scripts import Scripts

COUNT = 16
"""Fields per call (HSCAN's COUNT, a hint): the call reads their values too, up to 1 MiB each,
so a few keep the script's memory and time small."""


class StepsRepair:
    """Drops the steps of tasks that are gone, queue by queue."""

    def __init__(self, scripts: Scripts, *, count: int = COUNT) -> None:
        self._scripts = scripts
        self._count = count

    async def repair(self, queues: Iterable[str]) -> int:
        """One pass over the steps of ``queues``; returns how many tasks' steps it dropped."""
        dropped = 0
        for queue in queues:
            k = QueueKeys.of(queue)
            cursor = "0"
            while True:
                cursor, n = await self._scripts.call(
                    "orphan_steps", [k.meta, k.steps], [cursor, self._count]
                )
                dropped += int(n)
                if cursor == "0":
                    break
        return dropped
