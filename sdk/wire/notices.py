"""Completion callbacks: what the gateway POSTs to a task's ``notify`` URL when it ends.

The POST carries the Standard Webhooks headers, signed with the queue's notify secret
(``GET /v1/queues/{queue}/notify-secret``): ``webhook-id`` is the same on every try of one
notice (``<task id>_<finished ms>``), so a receiver can use it to drop repeats (delivery is at
least once). Any 2xx answer ends the delivery; anything else, or no answer, is retried with
backoff.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import Field, JsonValue

from sdk.wire.base import OutputModel
from sdk.wire.tasks import TaskState


class TaskNotice(OutputModel):
    """Body of a completion callback."""

    id: str = Field(description="The task's id.")
    queue: str
    name: str
    state: TaskState = Field(description="succeeded, failed, dead or cancelled.")
    result: JsonValue = Field(None, description="What the task returned, when it succeeded.")
    error: str | None = Field(None, description="Why it did not succeed, otherwise.")
    attempt: int = Field(description="Attempts it took.")
    finished_at: datetime
    owner: str | None = None


class NotifySecret(OutputModel):
    """Answer of ``GET`` and ``POST /v1/queues/{queue}/notify-secret``."""

    queue: str
    secret: str = Field(
        description="Standard Webhooks secret (whsec_…) that signs the queue's completion "
        "callbacks; verify them with it."
    )
    previous_secret_until: datetime | None = Field(
        None,
        description="After a rotation: until when notices are signed with the previous secret "
        "too (two signatures in webhook-signature), so receivers holding either accept them.",
    )
