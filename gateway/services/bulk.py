"""Operations on every task matching a filter: finding them, and cancelling them.

Built on :class:`~gateway.services.tasks.TaskService` (its filtered search and its cancel), so a
bulk cancel follows exactly the rules of cancelling one task. The JSON API
(``POST /v1/queues/{queue}/tasks/cancel``) and the admin UI's confirmation step both use it.
"""

from __future__ import annotations

from gateway.services.tasks import TaskService
from gateway.store.tasks import CancelResult
from sdk.wire import CancelledTasks, CancelMatching, Skipped, TaskState

STEP = 500  # tasks asked of one search (each walks at most 10,000 entries when filtered)


async def matching_ids(
    tasks: TaskService,
    queue: str,
    state: TaskState,
    limit: int,
    *,
    name: str | None = None,
    owner: str | None = None,
) -> list[str]:
    """Ids of up to ``limit`` tasks of ``queue`` in ``state`` matching the filters, in the
    state's order (a filtered walk goes through the whole index if it must), each once.

    Pages follow each other by offset while tasks come and go: one enqueued ahead of those
    already listed moves them back a place, so a page can start with a task listed before
    (kept once; the walk goes on until ``limit`` distinct tasks)."""
    ids: dict[str, None] = {}
    cursor: str | None = None
    while len(ids) < limit:
        found = await tasks.search(
            queue, state, cursor, min(limit - len(ids), STEP), owner=owner, name=name
        )
        ids.update(dict.fromkeys(t.id for t in found.page.items))
        cursor = found.page.next_cursor
        if cursor is None:
            break
    return list(ids)[:limit]


async def cancel_matching(
    tasks: TaskService, queue: str, request: CancelMatching
) -> CancelledTasks:
    """Cancel every task matching ``request`` (up to its limit), one by one, each counted by
    what its cancel script did, not by the state the listing saw: a task claimed since then is
    running and gets a cancel request; one that ended or went meanwhile is skipped, with why."""
    ids = await matching_ids(
        tasks, queue, request.state, request.limit, name=request.name, owner=request.owner
    )
    cancelled: list[str] = []
    requested: list[str] = []
    skipped: list[Skipped] = []
    for task_id in ids:
        done = await tasks.cancel_one(queue, task_id)
        if done.result is CancelResult.CANCELLED:
            cancelled.append(task_id)
        elif done.result is CancelResult.REQUESTED:
            requested.append(task_id)
        elif done.result is CancelResult.FINISHED and done.state is not None:
            skipped.append(Skipped(id=task_id, reason=f"already ended as {done.state.value}"))
        else:  # NOTASK, NOQUEUE: deleted (swept, cleaned, its queue deleted) meanwhile
            skipped.append(Skipped(id=task_id, reason="gone"))
    return CancelledTasks(cancelled=cancelled, cancel_requested=requested, skipped=skipped)
