"""API keys and scopes.

A key's scopes decide what it may do:

- ``admin``: everything;
- ``read``: every read (GET) of queues, endpoints and tasks, and the metrics;
- ``metrics``: ``GET /metrics`` only (for a Prometheus scraper);
- ``enqueue:<pattern>``: enqueue to, read the tasks of, and cancel tasks of queues whose name
  matches the shell-style pattern (``enqueue:mail-*``, ``enqueue:*``);
- ``work:<pattern>``: lease tasks (``POST .../leases``, pull workers) from queues whose name
  matches the pattern. The leased tasks' callbacks need no key: their lease token decides.
- ``events:<pattern>``: publish events (``POST /v1/events``) whose name matches the pattern
  (``events:billing.*``, ``events:*``).

Worker callbacks carry no key: their lease token authorises them (see ``services.callbacks``).
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from fnmatch import fnmatchcase

from gateway.core.errors import Forbidden, Unauthorized
from gateway.settings import (
    ADMIN_SCOPE,
    ENQUEUE_SCOPE,
    EVENTS_SCOPE,
    METRICS_SCOPE,
    READ_SCOPE,
    WORK_SCOPE,
    ApiKey,
)


class Access(StrEnum):
    """What a route needs."""

    ADMIN = "admin"  # change queues and endpoints
    READ = "read"  # read anything
    PRODUCE = "produce"  # enqueue, read and cancel tasks of one queue
    WORK = "work"  # lease tasks of one queue (a pull worker)
    PUBLISH = "publish"  # publish events of one name
    LEASE = "lease"  # a worker callback: no API key, the lease token decides
    PUBLIC = "public"  # the probes (/healthz, /readyz): no API key, nothing to protect
    METRICS = "metrics"  # scrape GET /metrics


@dataclass(frozen=True, slots=True)
class Principal:
    name: str
    scopes: tuple[str, ...]

    def may(self, access: Access, queue: str | None = None) -> bool:
        """Whether the key may do ``access`` on ``queue`` (for PUBLISH: the event's name;
        None: on some event, before the body names it)."""
        if ADMIN_SCOPE in self.scopes:
            return True
        if access is Access.PUBLISH:
            if queue is None:
                return any(scope.startswith(EVENTS_SCOPE) for scope in self.scopes)
            return _matches(self.scopes, EVENTS_SCOPE, queue)
        if access is Access.METRICS:
            return METRICS_SCOPE in self.scopes or READ_SCOPE in self.scopes
        if access is Access.READ and queue is None:
            return READ_SCOPE in self.scopes
        if access is Access.WORK and queue is not None:
            return _matches(self.scopes, WORK_SCOPE, queue)
        if access in (Access.READ, Access.PRODUCE) and queue is not None:
            if access is Access.READ and READ_SCOPE in self.scopes:
                return True
            return _matches(self.scopes, ENQUEUE_SCOPE, queue)
        return False

    def require(self, access: Access, queue: str | None = None) -> None:
        if not self.may(access, queue):
            target = f" on queue '{queue}'" if queue else ""
            if access is Access.PUBLISH:
                target = f" event '{queue}'" if queue else " events"
            raise Forbidden(f"this API key may not {access.value}{target}")


def _matches(scopes: tuple[str, ...], prefix: str, queue: str) -> bool:
    """Whether a ``<prefix><pattern>`` scope covers ``queue`` (or event name)."""
    return any(
        scope.startswith(prefix) and fnmatchcase(queue, scope.removeprefix(prefix))
        for scope in scopes
    )


class Authenticator:
    """Finds the principal of a bearer token, comparing keys in constant time."""

    def __init__(self, keys: Sequence[ApiKey]) -> None:
        self._keys = [
            (k.key.encode(), Principal(k.name or f"key-{i}", tuple(k.scopes)))
            for i, k in enumerate(keys)
        ]

    def keys_named(self, name: str) -> list[str]:
        """The configured keys whose principal is called ``name``."""
        return [key.decode() for key, principal in self._keys if principal.name == name]

    def authenticate(self, authorization: str | None) -> Principal:
        if not authorization:
            raise Unauthorized("send an API key as 'Authorization: Bearer <key>'")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise Unauthorized("the Authorization header must be 'Bearer <key>'")
        given = token.strip().encode()
        found = None
        for key, principal in self._keys:
            if hmac.compare_digest(key, given):
                found = principal
        if found is None:
            raise Unauthorized("unknown API key")
        return found
