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

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sdk.chains import AsyncChainHandle, Chain, ChainHandle, Chord, chain, chord
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
        TaskReceipt,
        TaskState,
    )
    from sdk.worker import Worker

__all__ = [
    "ApiError",
    "AsyncChainHandle",
    "AsyncClient",
    "AsyncContext",
    "AsyncGroupHandle",
    "AsyncTaskHandle",
    "Backoff",
    "BackoffStrategy",
    "Cancelled",
    "Chain",
    "ChainHandle",
    "Chord",
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
    "TaskReceipt",
    "TaskSignature",
    "TaskState",
    "TaskTimeout",
    "Warn",
    "Worker",
    "chain",
    "chord",
    "group",
    "task",
    "verify_notice",
]

# Every public name is imported from its module on first use (PEP 562), so ``import sdk`` costs
# next to nothing and each program loads what it uses: a producer the client and the wire models,
# a worker the ASGI side too. The names above, under TYPE_CHECKING, are for type checkers and
# readers; tests/sdk/test_sdk_public.py checks that both lists agree.
_MODULES: dict[str, str] = {
    "AsyncClient": "sdk.client",
    "Client": "sdk.client",
    "AsyncContext": "sdk.context",
    "Context": "sdk.context",
    "ApiError": "sdk.errors",
    "Cancelled": "sdk.errors",
    "Fail": "sdk.errors",
    "JobgateError": "sdk.errors",
    "Retry": "sdk.errors",
    "TaskFailed": "sdk.errors",
    "TaskTimeout": "sdk.errors",
    "AsyncChainHandle": "sdk.chains",
    "Chain": "sdk.chains",
    "ChainHandle": "sdk.chains",
    "Chord": "sdk.chains",
    "chain": "sdk.chains",
    "chord": "sdk.chains",
    "AsyncGroupHandle": "sdk.groups",
    "Group": "sdk.groups",
    "GroupHandle": "sdk.groups",
    "TaskSignature": "sdk.groups",
    "group": "sdk.groups",
    "AsyncTaskHandle": "sdk.handles",
    "TaskHandle": "sdk.handles",
    "verify_notice": "sdk.notices",
    "PullWorker": "sdk.pull",
    "Crontab": "sdk.schedules",
    "Interval": "sdk.schedules",
    "TaskFunction": "sdk.tasks",
    "task": "sdk.tasks",
    "Warn": "sdk.warnings",
    "Backoff": "sdk.wire",
    "BackoffStrategy": "sdk.wire",
    "Job": "sdk.wire",
    "JobCreate": "sdk.wire",
    "OverlapPolicy": "sdk.wire",
    "QueuePolicy": "sdk.wire",
    "Run": "sdk.wire",
    "RunStatus": "sdk.wire",
    "Task": "sdk.wire",
    "TaskCreate": "sdk.wire",
    "TaskNotice": "sdk.wire",
    "TaskReceipt": "sdk.wire",
    "TaskState": "sdk.wire",
    "Worker": "sdk.worker",
}


def __getattr__(name: str) -> object:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup finds it without coming here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
