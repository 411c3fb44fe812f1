"""Admin UI sessions and sign-in attempts in Redis, shared by every gateway.

A session's cookie is signed (``gateway.admin.session``), and the session is valid only while
its id is in its API key's set ``jg:sessions:<fingerprint>``: one ``ZSCORE`` per page. Signing
out removes the id; ending every session of a key deletes the set; both take effect on every
gateway at the next request, since nothing is cached.

Sign-in attempts: ``lua/sign_in_attempt.lua`` spends the form's nonce and counts the attempt
against the client's address in one call (see :class:`SignInRules`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import IntEnum

from redis.asyncio import Redis

from gateway.store import keys
from gateway.store.scripts import Scripts

MAX_SESSIONS_PER_KEY = 1000


@dataclass(frozen=True, slots=True)
class SignInRules:
    """How sign-in attempts of one client address are slowed down: ``free`` attempts are taken
    at once; each further one makes the next wait, ``first_delay_ms`` doubling up to
    ``max_delay_ms``; the count is forgotten ``window_ms`` after the last attempt (or after
    the delay it set)."""

    free: int = 5
    first_delay_ms: int = 1_000
    max_delay_ms: int = 15 * 60_000
    window_ms: int = 15 * 60_000
    nonce_ms: int = 3_600_000  # as long as the sign-in form's cookie lives


class Verdict(IntEnum):
    """What ``sign_in_attempt.lua`` answers."""

    SPENT = 0  # the form's nonce was used already
    WAIT = 1  # the address must wait
    GO = 2  # check the key


@dataclass(frozen=True, slots=True)
class Attempt:
    verdict: Verdict
    wait_ms: int = 0

    @property
    def spent(self) -> bool:
        """The form's nonce served an attempt already."""
        return self.verdict is Verdict.SPENT

    @property
    def waits(self) -> bool:
        """The client's address must wait ``wait_ms`` before its next attempt."""
        return self.verdict is Verdict.WAIT


class SessionStore:
    def __init__(self, redis: Redis, scripts: Scripts) -> None:
        self._redis = redis
        self._scripts = scripts

    async def open(self, fingerprint: str, session_id: str, now_ms: int, ttl_ms: int) -> None:
        await self._scripts.call(
            "open_session",
            [keys.sessions(fingerprint)],
            [now_ms, session_id, ttl_ms, MAX_SESSIONS_PER_KEY],
        )

    async def alive(self, fingerprint: str, session_id: str) -> bool:
        return await self._redis.zscore(keys.sessions(fingerprint), session_id) is not None

    async def end(self, fingerprint: str, session_id: str) -> None:
        await self._redis.zrem(keys.sessions(fingerprint), session_id)

    async def end_all(self, fingerprint: str, now_ms: int) -> int:
        """End every session of one key (one ``DEL``); how many had not expired, counted just
        before in the same round trip (a pipeline, not a transaction: it also runs on Redis
        Cluster)."""
        key = keys.sessions(fingerprint)
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.zcount(key, f"({now_ms}", "+inf")
            pipe.delete(key)
            ended, _ = await pipe.execute()
        return int(ended)

    async def attempt(self, nonce: str, address: str, now_ms: int, rules: SignInRules) -> Attempt:
        digest = hashlib.sha256(nonce.encode()).hexdigest()
        verdict, wait_ms = await self._scripts.call(
            "sign_in_attempt",
            [keys.sign_in_nonce(digest), keys.sign_in_address(address)],
            [
                now_ms,
                rules.nonce_ms,
                rules.free,
                rules.window_ms,
                rules.first_delay_ms,
                rules.max_delay_ms,
            ],
        )
        return Attempt(Verdict(int(verdict)), int(wait_ms))

    async def signed_in(self, address: str) -> None:
        """A sign-in from ``address`` succeeded: its attempts are forgotten."""
        await self._redis.delete(keys.sign_in_address(address))
