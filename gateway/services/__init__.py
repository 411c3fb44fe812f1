"""Services: what the HTTP routes call. Routes call services, services call the store.

Imports dispatch, jobs, telemetry, caches, security, store and core; imported by admin, api,
background and the app factory.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.security.auth import Authenticator
from gateway.services.activity import ActivityService
from gateway.services.callbacks import CallbackService
from gateway.services.catalog import CatalogService
from gateway.services.events import EventService
from gateway.services.jobs import JobService
from gateway.services.logs import LogService
from gateway.services.notices import NoticeService
from gateway.services.operations import OperationsService
from gateway.services.overview import OverviewService
from gateway.services.pulls import PullService
from gateway.services.queues import QueueService
from gateway.services.readiness import Readiness
from gateway.services.sessions import SessionService
from gateway.services.tasks import TaskService
from gateway.services.triggers import TriggerService
from gateway.services.waits import WaitResumer
from gateway.store.idempotency import IdempotencyStore
from gateway.telemetry.setup import PrometheusPage


@dataclass(frozen=True, slots=True)
class Services:
    queues: QueueService
    tasks: TaskService
    callbacks: CallbackService
    operations: OperationsService
    auth: Authenticator
    idempotency: IdempotencyStore
    max_body_bytes: int
    catalog: CatalogService
    activity: ActivityService
    overview: OverviewService
    notices: NoticeService
    logs: LogService
    jobs: JobService
    pulls: PullService
    sessions: SessionService
    events: EventService
    triggers: TriggerService
    readiness: Readiness | None = None
    # Waits for events and cancel_on: the consumer the events service hands each event to.
    waits: WaitResumer | None = None
    metrics: PrometheusPage | None = None  # GET /metrics; None when metrics are off
