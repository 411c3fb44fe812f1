"""The ``Idempotency-Key`` header: a POST that carries one runs at most once.

Semantics of draft-ietf-httpapi-idempotency-key-header, as Stripe has them. A key is scoped to
the API key's name, the method and the path. The first request with it runs and, when it
succeeds (2xx), its answer is kept for ``idempotency_ttl``; a repeat with the same body and query
gets that answer again, ``201`` turned into ``200``, with ``Idempotent-Replayed: true`` (and the
first answer's ``Preference-Applied``, whatever the repeat's ``Prefer`` asks). The same
key with another body is refused (409, problem type ``idempotency-key-reused``); a repeat
while the first still runs gets 409 with ``Retry-After: 1``. An error answer is not kept, so a
corrected retry goes through. Worker callbacks are not covered: their lease token fences them
already.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import secrets
from collections.abc import Awaitable, Callable
from typing import Annotated

from pydantic import Field
from starlette.requests import Request
from starlette.responses import Response

from gateway.api.problems import gateway_problem
from gateway.core.errors import Conflict, IdempotencyKeyReused, InvalidRequest
from gateway.store.idempotency import (
    Answered,
    IdempotencyStore,
    InProgress,
    Record,
    slot,
)
from sdk.wire import HEADER_PREFERENCE_APPLIED

log = logging.getLogger(__name__)

HEADER = "Idempotency-Key"
REPLAYED = "Idempotent-Replayed"
# 1 to 255 printable ASCII characters, not all spaces
Key = Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[ -~]*[!-~][ -~]*$")]
ANONYMOUS = "anonymous"
_VALID = re.compile(r"[ -~]{1,255}")


def requested_key(request: Request) -> str | None:
    """The request's Idempotency-Key, or None when it sends none."""
    value = request.headers.get(HEADER)
    if value is None:
        return None
    if not _VALID.fullmatch(value) or not value.strip():
        raise InvalidRequest(f"the {HEADER} header must be 1 to 255 printable ASCII characters")
    return value


def fingerprint(query: str, body: bytes) -> str:
    """What a repeat must match: the query string and the body, byte for byte."""
    digest = hashlib.sha256(query.encode())
    digest.update(b"\n")
    digest.update(body)
    return digest.hexdigest()


async def run_once(
    request: Request,
    store: IdempotencyStore,
    identity: str | None,
    key: str,
    body: bytes,
    run: Callable[[], Awaitable[Response]],
) -> Response:
    """The answer of ``run``, run only if no request with this key ran or runs already."""
    record_key = slot(identity or ANONYMOUS, request.method, request.url.path, key)
    marker = InProgress(fingerprint(request.url.query, body), secrets.token_hex(16))
    found = await store.claim(record_key, marker)
    if found is not None:
        return _repeat(found, marker.fingerprint)
    try:
        response = await run()
    except Exception:
        await _release(store, record_key, marker)
        raise
    if not 200 <= response.status_code < 300:
        await _release(store, record_key, marker)
        return response
    answer = Answered(
        marker.fingerprint,
        response.status_code,
        response.headers.get("content-type"),
        bytes(response.body).decode(),
        response.headers.get(HEADER_PREFERENCE_APPLIED),
    )
    try:
        await asyncio.shield(store.keep(record_key, marker, answer))
    except Exception:
        # The work is done and this answer is right: send it. A retry after the marker expires
        # would run the request again.
        log.warning("could not keep the answer for an %s", HEADER, exc_info=True)
    return response


def _repeat(found: Record, expected: str) -> Response:
    """The answer to a repeat: refused, asked to wait, or the kept answer again."""
    if found.fingerprint != expected:
        raise IdempotencyKeyReused(
            f"{HEADER} reused with a different request body; use a new key for a new request"
        )
    if isinstance(found, InProgress):
        response = gateway_problem(
            Conflict(f"a request with this {HEADER} is still running; retry in a moment")
        )
        response.headers["Retry-After"] = "1"
        return response
    headers = {REPLAYED: "true"}
    if found.preference_applied is not None:
        headers[HEADER_PREFERENCE_APPLIED] = found.preference_applied
    return Response(
        found.body.encode(),
        status_code=200 if found.status == 201 else found.status,
        media_type=found.content_type,
        headers=headers,
    )


async def _release(store: IdempotencyStore, record_key: str, marker: InProgress) -> None:
    """Let the key go after an error answer; if Redis fails here too, the marker expires."""
    try:
        await store.release(record_key, marker)
    except Exception:
        log.warning("could not release an %s", HEADER, exc_info=True)
