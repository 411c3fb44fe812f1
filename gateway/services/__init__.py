"""Services: what the HTTP routes call. Routes call services, services call the store."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.auth import Authenticator
from gateway.services.callbacks import CallbackService
from gateway.services.queues import QueueService
from gateway.services.tasks import TaskService


@dataclass(frozen=True, slots=True)
class Services:
    queues: QueueService
    tasks: TaskService
    callbacks: CallbackService
    auth: Authenticator
    max_body_bytes: int
