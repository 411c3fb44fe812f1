"""Routes for completion callbacks: the secret a producer verifies its notices with."""

from __future__ import annotations

from pydantic import BaseModel

from gateway.api.routing import QUEUE, Call, Operation
from gateway.security.auth import Access
from sdk.wire import NotifySecret, SecretRotation


async def get_notify_secret(call: Call) -> BaseModel:
    return await call.services.notices.secret(call.queue)


async def rotate_notify_secret(call: Call) -> BaseModel:
    return await call.services.notices.rotate(call.queue, call.body)


OPERATIONS = [
    Operation(
        "GET",
        "/v1/queues/{queue}/notify-secret",
        "Get the secret that signs the queue's completion callbacks",
        "tasks",
        Access.PRODUCE,
        get_notify_secret,
        response=NotifySecret,
        params=(QUEUE,),
        errors=(404,),
        description="A task enqueued with notify gets a TaskNotice POSTed to that URL when it "
        "ends, signed with this Standard Webhooks secret (made at first use; the same for "
        "every task of the queue). Producers of the queue (enqueue:<queue>) and admins may "
        "read it.",
    ),
    Operation(
        "POST",
        "/v1/queues/{queue}/notify-secret",
        "Rotate the secret that signs the queue's completion callbacks",
        "tasks",
        Access.ADMIN,
        rotate_notify_secret,
        body=SecretRotation,
        response=NotifySecret,
        params=(QUEUE,),
        errors=(404,),
        description="Notices are signed with the new secret and, for `overlap` seconds, with the "
        "previous one too (two signatures in webhook-signature), so a receiver still holding "
        "the previous secret keeps accepting them while it is given the new one "
        "(sdk.verify_notice accepts several secrets). A second rotation within the window drops "
        "the oldest secret at once; `overlap: 0` stops the previous one at once (after a leak).",
    ),
]
