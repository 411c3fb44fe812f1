"""Admin UI sessions kept in Redis, so they can be ended server-side, and sign-in throttling.

The cookie (``gateway.admin.session``) proves who opened a session; this service says whether
it is still open: signing out ends one session, ``DELETE /v1/keys/{key_name}/sessions`` every
session of one key (on every gateway at once: nothing is cached). Sessions are filed by the
key's fingerprint (an HMAC under the session signing key), never by the key.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Callable

from gateway.core.errors import NotFound
from gateway.security.auth import Authenticator
from gateway.store.clock import Clock
from gateway.store.sessions import Attempt, SessionStore, SignInRules
from sdk.wire import SessionsEnded


class KeyNotFound(NotFound):
    title = "API key not found"

    def __init__(self, name: str) -> None:
        super().__init__(f"no configured API key is named '{name}'")


def address_group(host: str) -> str:
    """The unit sign-in attempts are counted by: an IPv4 address, or an IPv6 address's /64 (one
    host often holds a whole /64); anything else as it is."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host[:100]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


def retry_after(attempt: Attempt) -> int:
    """Whole seconds to wait (``Retry-After``), at least 1."""
    return max(1, math.ceil(attempt.wait_ms / 1000))


class SessionService:
    def __init__(
        self,
        store: SessionStore,
        clock: Clock,
        auth: Authenticator,
        fingerprint: Callable[[str], str],
        ttl_seconds: int,
        rules: SignInRules | None = None,
    ) -> None:
        self._store = store
        self._clock = clock
        self._auth = auth
        self._fingerprint = fingerprint
        self._ttl_ms = ttl_seconds * 1000
        self._rules = rules or SignInRules()

    async def opened(self, api_key: str, session_id: str) -> None:
        """Record a session just opened (its cookie is about to be sent)."""
        await self._store.open(
            self._fingerprint(api_key), session_id, self._clock.now_ms(), self._ttl_ms
        )

    async def alive(self, api_key: str, session_id: str) -> bool:
        return await self._store.alive(self._fingerprint(api_key), session_id)

    async def end(self, api_key: str, session_id: str) -> None:
        await self._store.end(self._fingerprint(api_key), session_id)

    async def end_key(self, name: str) -> SessionsEnded:
        """End every session of the configured key(s) named ``name``."""
        found = self._auth.keys_named(name)
        if not found:
            raise KeyNotFound(name)
        now = self._clock.now_ms()
        ended = [await self._store.end_all(self._fingerprint(key), now) for key in found]
        return SessionsEnded(key_name=name, ended=sum(ended))

    async def attempt(self, nonce: str, host: str) -> Attempt:
        """Take a sign-in attempt with the form of ``nonce`` from client ``host``, or not."""
        return await self._store.attempt(
            nonce, address_group(host), self._clock.now_ms(), self._rules
        )

    async def signed_in(self, host: str) -> None:
        await self._store.signed_in(address_group(host))
