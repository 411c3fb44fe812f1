"""Idempotency-Key records in Redis: one string key per (API key, method, path, Idempotency-Key).

A record is first an :class:`InProgress` marker, set with ``SET NX`` and a short expiry
(:data:`IN_PROGRESS_MS`), so that of several gateways receiving the same request only one runs
it, and a gateway that crashes mid-request blocks the key for a minute at most. When the request
is answered, the ``settle_idempotency`` script replaces the marker with the :class:`Answered`
record kept for the TTL (a 2xx answer), or deletes it (an error: nothing was done, a corrected
retry may go through). The script changes the record only while it still holds this request's own
marker, so a request that ran past its marker's expiry cannot overwrite or delete the record of a
later one.

Records are JSON strings: ``{"fp", "token"}`` in progress, ``{"fp", "status", "type", "body"}``
answered (``fp`` is the request's fingerprint, ``type`` the answer's content type), with
``"applied"`` when the answer had a ``Preference-Applied`` header (a minimal enqueue answer).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from gateway.store import keys
from gateway.store.scripts import Scripts

IN_PROGRESS_MS = 60_000


@dataclass(frozen=True, slots=True)
class InProgress:
    """A request holding the key while it runs; ``token`` tells it from any other."""

    fingerprint: str
    token: str


@dataclass(frozen=True, slots=True)
class Answered:
    """The answer to replay to a repeat of the request."""

    fingerprint: str
    status: int
    content_type: str | None
    body: str
    preference_applied: str | None = None


Record = InProgress | Answered


def slot(identity: str, method: str, path: str, key: str) -> str:
    """The Redis key of one Idempotency-Key, used by ``identity`` on ``method path``."""
    raw = json.dumps([identity, method.upper(), path, key], separators=(",", ":"))
    return keys.idempotency(hashlib.sha256(raw.encode()).hexdigest())


def _encode(record: Record) -> str:
    fields: dict[str, Any]
    if isinstance(record, InProgress):
        fields = {"fp": record.fingerprint, "token": record.token}
    else:
        fields = {
            "fp": record.fingerprint,
            "status": record.status,
            "type": record.content_type,
            "body": record.body,
        }
        if record.preference_applied is not None:
            fields["applied"] = record.preference_applied
    return json.dumps(fields, separators=(",", ":"))


def _decode(raw: str) -> Record:
    fields = json.loads(raw)
    if "token" in fields:
        return InProgress(fields["fp"], fields["token"])
    return Answered(
        fields["fp"], int(fields["status"]), fields["type"], fields["body"], fields.get("applied")
    )


class IdempotencyStore:
    def __init__(self, redis: Redis, scripts: Scripts, *, ttl_ms: int) -> None:
        self._redis = redis
        self._scripts = scripts
        self._ttl_ms = ttl_ms

    async def claim(self, key: str, marker: InProgress) -> Record | None:
        """Take ``key`` for a request about to run: None when taken, else the record already
        there (another request's marker, or its answer). One ``SET NX GET``: atomic."""
        found = await self._redis.set(key, _encode(marker), nx=True, px=IN_PROGRESS_MS, get=True)
        return None if found is None else _decode(str(found))

    async def keep(self, key: str, marker: InProgress, answer: Answered) -> bool:
        """Replace this request's marker with its answer; False when the marker was gone."""
        return await self._settle(key, marker, _encode(answer))

    async def release(self, key: str, marker: InProgress) -> bool:
        """Delete this request's marker (nothing was done); False when it was gone already."""
        return await self._settle(key, marker, "")

    async def _settle(self, key: str, marker: InProgress, record: str) -> bool:
        reply = await self._scripts.call(
            "settle_idempotency", [key], [_encode(marker), record, self._ttl_ms]
        )
        return bool(reply)
