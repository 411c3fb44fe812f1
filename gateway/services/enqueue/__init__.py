"""The enqueue, one stage after another, called in order from :meth:`Enqueue.run`.

A request (``POST /v1/queues/{queue}/tasks`` and ``…/tasks/batch``, :mod:`gateway.api.tasks`;
a job's run, :mod:`gateway.services.runs`) reaches :meth:`TaskService.enqueue_created
<gateway.services.tasks.TaskService.enqueue_created>`, which hands it here:

1. checks of the specification: its options (:mod:`.options`: ids given twice, completion
   callback URLs), the queue (the directory's cached view), its keys against the queue's policy
   (:mod:`.keys`), the names and payloads against the task catalog
   (:mod:`gateway.services.catalog`; the policy's ``unknown_tasks`` says whether a name no
   endpoint reported is refused), its flow (:mod:`.flow`: dependencies outside the batch);
2. the new records (:mod:`.new_records`: each task as the store keeps it);
3. the store (:meth:`gateway.store.tasks.enqueue.Enqueuing.enqueue_batch`: one round trip, the
   claim an idle dispatcher asked for riding along, then ``lua/enqueue.lua``);
4. what follows the store (:mod:`.after_store`: metrics, links to dependencies in other queues,
   the wake-up);
5. the answer (:mod:`.answers`: each task's :class:`~.created.Created`, whose JSON
   :mod:`.created` writes for the route).

No stage imports this module or calls back into it: each gets what it needs as arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gateway.caches.directory import Directory
from gateway.core.errors import QueueNotFound, ValidationFailed
from gateway.core.ids import IdMaker
from gateway.services.catalog import CatalogService
from gateway.services.enqueue.after_store import cross_links, ready_count, stored_names
from gateway.services.enqueue.answers import answers
from gateway.services.enqueue.created import Created
from gateway.services.enqueue.flow import locate_dependencies
from gateway.services.enqueue.keys import key_problems
from gateway.services.enqueue.new_records import is_ready_now, new_records
from gateway.services.enqueue.options import given_ids, notify_problems
from gateway.services.task_reads import TaskReader
from gateway.store.clock import Clock
from gateway.store.dependencies import DependencyStore
from gateway.store.tasks import ClaimOrder, TaskStore
from gateway.telemetry.metrics import Metrics
from gateway.telemetry.tracing import TraceHeaders, Tracing
from sdk.wire import TaskCreate

__all__ = ["Created", "Enqueue"]


class Enqueue:
    """Stores tasks, all of a batch or none, and makes each one's answer.

    ``on_ready(queue, count)``: tasks became ready (``count`` of them for the pull polls, 0 when
    the script told every gateway's polls itself); ``claim_for(queue)``: the claim an idle
    dispatcher wants carried in the enqueue's round trip (:meth:`Dispatcher.offer
    <gateway.dispatch.dispatcher.Dispatcher.offer>`), or None."""

    def __init__(
        self,
        tasks: TaskStore,
        directory: Directory,
        clock: Clock,
        dependencies: DependencyStore,
        reader: TaskReader,
        *,
        on_ready: Callable[[str, int], None],
        claim_for: Callable[[str], ClaimOrder | None],
        catalog: CatalogService | None,
        allow_private_urls: bool,
        tracing: Tracing,
        metrics: Metrics,
    ) -> None:
        self._tasks = tasks
        self._directory = directory
        self._clock = clock
        self._dependencies = dependencies
        self._reader = reader
        self._on_ready = on_ready
        self._claim_for = claim_for
        self._catalog = catalog
        self._allow_private = allow_private_urls
        self._tracing = tracing
        self._metrics = metrics
        self._ids = IdMaker()

    async def run(
        self,
        queue: str,
        specs: Sequence[TaskCreate],
        batch: bool,
        trace: TraceHeaders | None,
        job: str | None = None,
        parent: tuple[str, str, str] | None = None,
    ) -> list[Created]:
        """Store every task or none; each task's answer (:class:`Created`)."""
        # 1. Checks of the specification: options, the queue, keys, catalog, flow.
        given = given_ids(specs)
        problems = await notify_problems(specs, self._allow_private)
        # The policy only shapes the answer (max_attempts) and reads the keys: a second-old
        # copy will do, and the enqueue script itself refuses a queue that does not exist.
        view = await self._directory.view(queue)
        if view is None:
            raise QueueNotFound(queue)
        policy = view.policy
        problems += key_problems(specs, policy)
        if problems:
            raise ValidationFailed(problems)
        if self._catalog is not None:
            await self._catalog.check_enqueue(queue, specs, policy.unknown_tasks)
        located = await locate_dependencies(self._tasks, specs, given)

        # 2. The new records, and 3. the store. An idle dispatcher here has its claim ride in
        # the enqueue's round trip, so a task that can go now is pushed without waiting for a
        # dispatcher cycle. (Asked for right before the round trip: the store hands every order
        # it was given its answer.) The pushes of what it took start as tasks of their own,
        # which run once this one yields: nothing below awaits anything but Redis (and a plain
        # enqueue nothing at all), so the answer is written first and the pushes right after,
        # and the answer never waits for a push.
        now = self._clock.now_ms()
        ready_now = any(is_ready_now(spec, now) for spec in specs)
        order = None
        ids = iter(self._ids.take(len(specs) - sum(spec.id is not None for spec in specs)))
        if not self._tracing.enabled:
            new = new_records(specs, now, located, queue, policy, trace, ids, job, parent=parent)
            order = self._claim_for(queue) if ready_now else None
            enqueued = await self._tasks.enqueue_batch(
                queue, new, now, client_ids=bool(given), claim=order
            )
        else:
            untraced = new_records(
                specs, now, located, queue, policy, None, ids, job, parent=parent, plain=False
            )
            with self._tracing.enqueue(queue, untraced, batch=batch) as new:
                order = self._claim_for(queue) if ready_now else None
                enqueued = await self._tasks.enqueue_batch(
                    queue, new, now, client_ids=bool(given), claim=order
                )

        # 4. What follows the store: metrics, links, the wake-up.
        stored = enqueued.stored
        self._metrics.enqueued(queue, stored_names(new, stored))
        links = cross_links(new, stored)
        if links:
            await self._dependencies.link(queue, links, now)
        ready = ready_count(stored)
        if ready and not (order and enqueued.announced):
            # Pub/sub tells the pull polls of every gateway, this one's too, when the script
            # announced the tasks: counting them here as well would wake twice as many. (Then
            # only the dispatcher is left to wake, and a claim that rode along did that.)
            self._on_ready(queue, 0 if enqueued.announced else ready)

        # 5. The answer.
        linked = {task_id for task_id, _, _ in links}
        return await answers(queue, specs, new, stored, policy, self._reader.read, linked)
