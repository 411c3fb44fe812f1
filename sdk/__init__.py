"""Jobgate's Python SDK: enqueue tasks (producers) and serve them (workers).

::

    from sdk import Worker, task

    @task("emails")
    def send_welcome(user_id: int) -> None: ...

    send_welcome.delay(7)                                   # producer
    client.create_job(title="Daily", task=send_welcome, args=[7], schedule=Crontab(hour="3"))
    group(send_welcome.s(1), send_welcome.s(2)).delay()     # one batch, one group
    app = Worker(tasks=[send_welcome], secret="whsec_...")  # worker: any ASGI server
"""

from sdk.client import AsyncClient, Client
from sdk.context import AsyncContext, Context
from sdk.errors import (
    ApiError,
    Cancelled,
    Fail,
    JobgateError,
    Retry,
    TaskFailed,
    TaskTimeout,
)
from sdk.groups import AsyncGroupHandle, Group, GroupHandle, TaskSignature, group
from sdk.handles import AsyncTaskHandle, TaskHandle
from sdk.notices import verify_notice
from sdk.pull import PullWorker
from sdk.schedules import Crontab, Interval
from sdk.tasks import TaskFunction, task
from sdk.warnings import Warn
from sdk.wire import (
    Backoff,
    BackoffStrategy,
    Job,
    JobCreate,
    OverlapPolicy,
    QueuePolicy,
    Run,
    RunStatus,
    Task,
    TaskCreate,
    TaskNotice,
    TaskState,
)
from sdk.worker import Worker

__all__ = [
    "ApiError",
    "AsyncClient",
    "AsyncContext",
    "AsyncGroupHandle",
    "AsyncTaskHandle",
    "Backoff",
    "BackoffStrategy",
    "Cancelled",
    "Client",
    "Context",
    "Crontab",
    "Fail",
    "Group",
    "GroupHandle",
    "Interval",
    "Job",
    "JobCreate",
    "JobgateError",
    "OverlapPolicy",
    "PullWorker",
    "QueuePolicy",
    "Retry",
    "Run",
    "RunStatus",
    "Task",
    "TaskCreate",
    "TaskFailed",
    "TaskFunction",
    "TaskHandle",
    "TaskNotice",
    "TaskSignature",
    "TaskState",
    "TaskTimeout",
    "Warn",
    "Worker",
    "group",
    "task",
    "verify_notice",
]
