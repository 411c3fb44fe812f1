"""The app factory: one Starlette app whose lifespan owns every long-lived part.

The lifespan connects to Redis, loads the scripts, measures the clock, and starts the pub/sub
listener, the dispatcher, the recoverer's loop and the scheduler of the slow jobs (the due-index
rescan, the clock sync); it stops them in reverse order, and flushes the spans last. Nothing
lives in module globals: two apps in one process do not share anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from starlette.applications import Starlette
from starlette.middleware import Middleware

from gateway.admin import admin_mount, session_codec
from gateway.api import OPERATIONS
from gateway.api import tasks as task_routes
from gateway.api.access_log import AccessLog
from gateway.api.direct import DirectRoute
from gateway.api.problems import EXCEPTION_HANDLERS
from gateway.api.routing import routes
from gateway.api.target import RefuseFragments
from gateway.background.due_loop import DueLoop
from gateway.background.event_upkeep import EventUpkeep
from gateway.background.job_firing import Firing
from gateway.background.recover_loop import Recoverer
from gateway.background.redriver import Redriver
from gateway.caches.catalog import Catalog
from gateway.caches.directory import Directory
from gateway.caches.triggers import TriggerCache
from gateway.dispatch.calls import CallRunner
from gateway.dispatch.dispatcher import Dispatcher
from gateway.dispatch.notices import NoticeDelivery
from gateway.dispatch.pusher import Pusher, new_session
from gateway.security.auth import Authenticator
from gateway.services import Services
from gateway.services.activity import ActivityService
from gateway.services.callbacks import CallbackService
from gateway.services.calls import Calls
from gateway.services.catalog import CatalogService
from gateway.services.events import EventService
from gateway.services.invokes import Invokes
from gateway.services.jobs import JobService
from gateway.services.logs import LogService
from gateway.services.notices import NoticeService
from gateway.services.operations import OperationsService
from gateway.services.overview import OverviewService
from gateway.services.pull_waiters import PullWaiters
from gateway.services.pulls import PullService
from gateway.services.queues import QueueService
from gateway.services.readiness import Readiness
from gateway.services.runs import Runs
from gateway.services.sessions import SessionService
from gateway.services.tasks import TaskService
from gateway.services.triggers import TriggerService, TriggerStarts
from gateway.services.waits import WaitResumer, Waits
from gateway.settings import Settings
from gateway.store.catalog import CatalogStore
from gateway.store.clock import RedisClock
from gateway.store.connection import connect, server_time_ms
from gateway.store.dependencies import DependencyStore
from gateway.store.events import EventStore
from gateway.store.idempotency import IdempotencyStore
from gateway.store.index import IndexRepair
from gateway.store.jobs import JobStore
from gateway.store.notices import NoticeStore
from gateway.store.operations import OperationsStore
from gateway.store.orphans import StepsRepair
from gateway.store.overview import OverviewStore
from gateway.store.pubsub import Notifier
from gateway.store.queues import QueueStore
from gateway.store.redrive import RedriveStore
from gateway.store.replication import Durability
from gateway.store.scripts import Scripts
from gateway.store.sessions import SessionStore
from gateway.store.tasks import TaskStore
from gateway.store.triggers import TriggerStore
from gateway.telemetry.export import MetricsExport
from gateway.telemetry.server_spans import ServerSpans
from gateway.telemetry.setup import set_up_metrics
from gateway.telemetry.tracing import Tracing

log = logging.getLogger(__name__)

CLOCK_SYNC_JOB_ID = "clock-sync"


def create_app(
    settings: Settings, tracing: Tracing | None = None, *, metrics: MetricsExport | None = None
) -> Starlette:
    """The gateway app. ``tracing`` defaults to what the ``OTEL_*`` variables configure (off
    unless they name an exporter: docs/observability.md). ``metrics``: a meter provider to
    record into (tests hand in one with an in-memory reader); by default the app builds its own
    (gateway/telemetry/export.py)."""
    tracing = tracing or Tracing.from_env()
    # Pull long polls waiting for work; made here so the server can end them as soon as it is
    # told to stop, before it waits for the requests in flight (gateway/serving/server.py).
    pull_waiters = PullWaiters()
    codec = session_codec(settings)  # admin UI session cookies

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
        if not settings.api_keys:
            log.warning(
                "no API keys are configured: every /v1 request except worker callbacks will be "
                "answered 401. Set JOBGATE_API_KEYS, e.g. "
                'JOBGATE_API_KEYS=\'[{"key": "<16+ characters>", "scopes": ["admin"]}]\''
            )
        waits = settings.wait_timeout if settings.wait_replicas else 0.0
        redis = await connect(settings.redis_url, settings.redis_timeout, waits)
        scripts = Scripts(redis, compact_records=settings.compact_records)
        await scripts.load()
        clock = RedisClock(lambda: server_time_ms(redis))
        await clock.sync()
        # This process's name in the wake messages of its enqueues (gateway/store/pubsub.py).
        origin = secrets.token_hex(6)
        tasks = TaskStore(
            redis,
            scripts,
            durability=Durability(settings.wait_replicas, settings.wait_timeout),
            origin=origin,
        )
        queues = QueueStore(redis, scripts)
        dependencies = DependencyStore(redis, scripts)
        directory = Directory(queues)
        telemetry = set_up_metrics(
            settings, redis, directory, lambda queue: catalog.cached_names(queue), metrics
        )
        recorder = telemetry.recorder
        session = new_session(allow_private=settings.allow_private_endpoints)
        notice_store = NoticeStore(redis, scripts)
        rng = random.Random()
        dispatcher = Dispatcher(
            tasks,
            directory,
            Pusher(session, settings.callback_base, tracing, recorder),
            clock,
            batch=settings.dispatch_batch,
            rng=rng,
            metrics=recorder,
        )

        def wake(queue: str, ready: int | None = None) -> None:
            """There may be ready work on ``queue``: for the dispatcher and the pull polls.
            ``ready``: how many tasks became ready, when known (the polls to wake)."""
            dispatcher.wake(queue)
            pull_waiters.wake(queue, ready)

        # Durable HTTP calls (ctx.call), made over the pushes' session (docs/durable.md).
        call_runner = CallRunner.of(settings, tasks, session, clock, on_ready=wake)
        catalog_store = CatalogStore(redis, scripts)
        catalog = Catalog(catalog_store)

        operations_store = OperationsStore(redis, scripts, tasks)
        redriver = Redriver(
            RedriveStore(redis, scripts, operations_store),
            queues,
            clock,
            on_ready=wake,
        )

        def changed_here(queue: str) -> None:
            """``queue``'s policy or endpoints changed, here or through another gateway."""
            directory.forget(queue)
            catalog.forget(queue)
            dispatcher.changed(queue)
            pull_waiters.wake(queue)
            redriver.changed(queue)

        def changed(queue: str) -> None:
            """A change made through this gateway: acted on here now, and by every gateway
            when the pub/sub message comes round."""
            changed_here(queue)
            notifier.changed(queue)  # made below, before anything can change

        recoverer = Recoverer(
            tasks,
            queues,
            clock,
            on_ready=wake,
            rng=rng,
            dependencies=dependencies,
            interval=settings.recover_interval,
            sweep_interval=settings.sweep_interval,
            max_sleep=settings.rescan_interval,
            metrics=recorder,
            index_repair=IndexRepair(redis, scripts),
            steps_repair=StepsRepair(scripts),
            calls=call_runner,
        )

        def reconnected() -> None:
            """The pub/sub connection is back after a failure: Redis answers again, and wake-ups
            published meanwhile were lost. Every loop looks again now rather than at its next
            retry or sleep's end, and the clock is measured again (Redis may be another host)."""
            dispatcher.wake_all()
            pull_waiters.wake_all()
            recoverer.reconnected()
            firing.reconnected()
            firing_loop.notice(clock.now_ms())  # made below, before the notifier starts
            delivery_loop.notice(clock.now_ms())
            event_upkeep.notice(clock.now_ms())
            redriver.reconnected()
            with contextlib.suppress(JobLookupError):  # shutting down: the jobs are gone
                redriver.run_soon(scheduler)
                scheduler.modify_job(CLOCK_SYNC_JOB_ID, next_run_time=datetime.now(UTC))

        notices = NoticeDelivery(
            notice_store,
            session,
            clock,
            timeout=settings.notify_timeout,
            max_tries=settings.notify_max_tries,
            retry_delay=settings.notify_retry_delay,
            max_retry_delay=settings.notify_max_retry_delay,
            rng=rng,
        )

        notifier = Notifier(
            redis,
            on_wake=wake,
            on_due=recoverer.notice,
            on_notice=lambda due_ms: delivery_loop.notice(due_ms),  # made below
            on_job=lambda due_ms: firing_loop.notice(due_ms),
            on_reconnect=reconnected,
            on_change=changed_here,
            origin=origin,
            # This gateway's enqueue claimed for its dispatcher or woke it already: the message
            # is for the pull polls (it says how many tasks to wake them for).
            on_own_wake=pull_waiters.wake,
        )
        catalog_service = CatalogService(catalog, catalog_store, queues, clock, on_change=changed)
        task_service = TaskService(
            tasks,
            queues,
            directory,
            clock,
            notifier,
            dependencies,
            on_ready=wake,
            claim_for=dispatcher.offer,
            catalog=catalog_service,
            allow_private_urls=settings.allow_private_endpoints,
            tracing=tracing,
            metrics=recorder,
        )
        job_store = JobStore(
            redis,
            scripts,
            runs_kept=settings.job_runs_kept,
            resume_ms=round(settings.job_resume_after * 1000),
        )
        log_service = LogService(tasks)
        runs = Runs(
            job_store, task_service, pause_after_claim_ms=settings.test_pause_after_claim_ms
        )
        firing = Firing(job_store, runs, clock, grace_ms=round(settings.job_misfire_grace * 1000))
        auth = Authenticator(settings.api_keys)
        trigger_store = TriggerStore(redis)
        trigger_cache = TriggerCache(trigger_store)
        # The events' consumers, in order: the triggers' tasks first, then the waits and
        # cancel_on they resume and cancel (docs/events.md, docs/durable.md).
        wait_resumer = WaitResumer(tasks, clock)
        events = EventService(
            EventStore(redis, scripts),
            [TriggerStarts(trigger_cache, task_service), wait_resumer],
            clock,
            retention_ms=round(settings.event_retention * 1000),
            on_hold=lambda due_ms: event_upkeep.notice(due_ms),  # made below
        )
        sweeps, rescans = settings.sweep_interval, settings.rescan_interval
        # Invoked children: enqueued by the callback, and again from the outbox by the
        # recoverer when a gateway stopped before it enqueued one (docs/durable.md).
        invokes = Invokes(tasks, task_service, clock)
        dependencies.on_invoke = invokes.deliver
        event_upkeep = EventUpkeep(events, clock, sweep_interval=sweeps, max_sleep=rescans)
        services = Services(
            queues=QueueService(
                queues,
                tasks,
                clock,
                allow_private_endpoints=settings.allow_private_endpoints,
                on_change=changed,
                catalog=catalog_service,
            ),
            tasks=task_service,
            callbacks=CallbackService(
                tasks,
                queues,
                clock,
                rng=rng,
                log_lines_kept=settings.log_lines_kept,
                metrics=recorder,
                # After a wait is recorded, it reads the events accepted since (its lookback
                # included): one that came meanwhile resumes it (docs/durable.md).
                waits=Waits(tasks, clock, recent=events),
                invokes=invokes,
                calls=Calls(tasks, call_runner, clock),
            ),
            operations=OperationsService(operations_store, queues, clock, on_ready=wake),
            waits=wait_resumer,
            auth=auth,
            idempotency=IdempotencyStore(redis, scripts, ttl_ms=settings.idempotency_ttl * 1000),
            max_body_bytes=settings.max_body_bytes,
            catalog=catalog_service,
            activity=ActivityService(tasks, queues, clock),
            overview=OverviewService(OverviewStore(redis, scripts), clock),
            notices=NoticeService(notice_store, clock),
            logs=log_service,
            jobs=JobService(
                job_store, runs, queues, task_service, clock, log_service, catalog_service
            ),
            readiness=Readiness(
                scripts,
                {
                    "recoverer": lambda: not recovering.done(),
                    "dispatcher": lambda: dispatcher.running,
                    "job firing": lambda: not loops[0].done(),
                    "completion callbacks": lambda: not loops[1].done(),
                    "event upkeep": lambda: not loops[2].done(),
                    "scheduler": lambda: bool(scheduler.running),
                },
                stalled={
                    "recoverer": lambda: recoverer.stalled,
                    "dispatcher": lambda: dispatcher.stalled,
                    "job firing": lambda: firing_loop.stalled,
                    "completion callbacks": lambda: delivery_loop.stalled,
                    "event upkeep": lambda: event_upkeep.stalled,
                },
            ),
            metrics=telemetry.page,
            pulls=PullService(tasks, directory, clock, pull_waiters, settings.callback_base),
            sessions=SessionService(
                SessionStore(redis, scripts), clock, auth, codec.fingerprint, settings.session_ttl
            ),
            events=events,
            triggers=TriggerService(trigger_store, trigger_cache, queues, clock),
        )
        scheduler = AsyncIOScheduler()
        recoverer.schedule(scheduler, settings.rescan_interval)
        redriver.schedule(scheduler, settings.redrive_interval, settings.rescan_interval)
        scheduler.add_job(
            clock.sync_within,
            "interval",
            args=[settings.clock_sync_interval / 2],
            seconds=settings.clock_sync_interval,
            id=CLOCK_SYNC_JOB_ID,
            max_instances=1,
            coalesce=True,
        )
        firing_loop = DueLoop(
            "job",
            firing.fire_job,
            job_store.earliest,
            clock,
            interval=settings.jobs_interval,
            max_sleep=settings.rescan_interval,
        )
        delivery_loop = DueLoop(
            "completion callback",
            notices.tick,
            notice_store.earliest,
            clock,
            interval=settings.recover_interval,
            max_sleep=settings.rescan_interval,
        )
        await notifier.start()
        scheduler.start()
        recovering = asyncio.create_task(recoverer.run(), name="jobgate-recoverer")
        loops = [
            asyncio.create_task(firing_loop.run(), name="jobgate-firing"),
            asyncio.create_task(delivery_loop.run(), name="jobgate-notices"),
            asyncio.create_task(event_upkeep.run(), name="jobgate-event-upkeep"),
        ]
        for queue in await queues.names():
            dispatcher.changed(queue)
        try:
            yield {"services": services}
        finally:
            pull_waiters.close()
            scheduler.shutdown(wait=False)
            recoverer.stop()
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                # A step under way finishes (each change is one script); one stuck on an
                # unreachable Redis is cut off, and its queue is due again at its mark.
                await asyncio.wait_for(recovering, timeout=5)
            firing_loop.stop()
            delivery_loop.stop()
            event_upkeep.stop()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*loops, return_exceptions=True), timeout=5)
            await dispatcher.stop()
            await notices.stop()
            await call_runner.close()
            await notifier.stop()
            await catalog.close()
            await directory.close()
            await session.close()
            await telemetry.close()
            await redis.aclose()
            tracing.shutdown()

    middleware = [Middleware(AccessLog)] if settings.access_log else []
    middleware.append(Middleware(RefuseFragments))
    if tracing.enabled:
        middleware.append(Middleware(ServerSpans, tracing=tracing))
    # Innermost: single enqueues skip the router (gateway/api/direct.py).
    enqueue = next(op for op in OPERATIONS if op.handler is task_routes.enqueue)
    middleware.append(Middleware(DirectRoute, operation=enqueue))
    app = Starlette(
        routes=[*routes(OPERATIONS), admin_mount(settings, codec)],
        exception_handlers=EXCEPTION_HANDLERS,
        middleware=middleware,
        lifespan=lifespan,
    )
    app.state.pull_waiters = pull_waiters
    return app
