"""Receiving completion callbacks: a producer that enqueued a task with ``notify=<url>`` gets a
signed :class:`~sdk.wire.TaskNotice` POSTed there when the task ends.

::

    from sdk import verify_notice

    secret = client.notify_secret("emails")            # once; keep it with your config

    async def done(request):                           # your web framework's handler
        notice = verify_notice(await request.body(), request.headers, secret)
        ...                                            # notice.id, .state, .result, .error
        return Response(status_code=204)               # any 2xx: delivered

Delivery is at least once: drop repeats by ``webhook-id`` (the same on every try of a notice).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sdk.signatures import Verifier
from sdk.wire import TaskNotice

__all__ = ["verify_notice"]


def verify_notice(
    body: bytes, headers: Mapping[str, str], secret: str | Sequence[str]
) -> TaskNotice:
    """The notice in ``body`` once its signature checks out against the queue's notify secret
    (or any of several, while you switch); raises :class:`~sdk.errors.SignatureError` when it
    does not, or when it is more than five minutes old."""
    Verifier(secret).verify(body, headers)
    return TaskNotice.model_validate_json(body)
