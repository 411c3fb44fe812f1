"""Admin UI session cookies and CSRF tokens: signed and expiring.

A session is a cookie holding ``<payload>.<signature>`` (both base64url): the payload names the
API key it was opened with (by an HMAC fingerprint, never the key itself), a random session id
and an expiry time; the signature is an HMAC-SHA256 of the payload. Any gateway that shares the
signing key accepts a session another one opened (several gateways behind one load balancer).
A session ends with its expiry, with its API key being removed from ``JOBGATE_API_KEYS``, with
the signing key changing, or when its id leaves Redis (sign-out, or every session of its key
ended: ``gateway.services.sessions``); this module checks all but the last.

The signing key is ``JOBGATE_SESSION_SECRET`` when set, else derived from the configured API
keys (so gateways with the same keys agree without more configuration; changing the keys signs
everyone out).

CSRF: every form of a signed-in page carries ``csrf_token(session)``, an HMAC of the session id,
which a POST must send back (form field or header); it dies with its session. The sign-in form,
which has no session yet, is tied the same way to a random nonce kept in a short-lived cookie
(double submit, signed); an attempt spends the nonce (``gateway.services.sessions``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

_DERIVE = b"jobgate admin session key v1"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def signing_key(secret: str | None, api_keys: Sequence[str]) -> bytes:
    """The key that signs sessions: the configured secret, else one derived from the API keys
    (order does not matter)."""
    if secret:
        return hashlib.sha256(_DERIVE + b"\0" + secret.encode()).digest()
    material = "\n".join(sorted(api_keys)).encode()
    return hmac.new(_DERIVE, material, hashlib.sha256).digest()


@dataclass(frozen=True, slots=True)
class Session:
    """A valid session: the API key it was opened with, its id and when it ends (epoch s)."""

    api_key: str
    session_id: str
    expires_at: int


class SessionCodec:
    """Opens and checks sessions and CSRF tokens. ``now`` gives epoch seconds (injectable so
    tests can move time)."""

    def __init__(
        self,
        key: bytes,
        api_keys: Sequence[str],
        ttl_seconds: int,
        now: Callable[[], float] = time.time,
    ) -> None:
        self._key = key
        self._ttl = ttl_seconds
        self._now = now
        self._keys = {self.fingerprint(k): k for k in api_keys}

    @property
    def ttl(self) -> int:
        return self._ttl

    def _mac(self, purpose: str, data: bytes) -> bytes:
        return hmac.new(self._key, purpose.encode() + b"\0" + data, hashlib.sha256).digest()

    def fingerprint(self, api_key: str) -> str:
        """The key's HMAC fingerprint: what a session names it by, here and in Redis."""
        return _b64(self._mac("key", api_key.encode())[:18])

    def open(self, api_key: str) -> str:
        """A session token for an API key (which the caller has authenticated)."""
        return self.issue(api_key)[0]

    def issue(self, api_key: str) -> tuple[str, Session]:
        """A new session of an API key: its token and what the token holds."""
        session = Session(api_key, secrets.token_urlsafe(18), int(self._now()) + self._ttl)
        payload = {"k": self.fingerprint(api_key), "s": session.session_id, "e": session.expires_at}
        body = _b64(json.dumps(payload, separators=(",", ":")).encode())
        return f"{body}.{_b64(self._mac('session', body.encode()))}", session

    def check(self, token: str | None) -> Session | None:
        """The session a token holds, or None when it is malformed, forged, expired or its key
        is no longer configured."""
        if not token or token.count(".") != 1:
            return None
        body, signature = token.split(".")
        try:
            given = _unb64(signature)
            if not hmac.compare_digest(given, self._mac("session", body.encode())):
                return None
            payload = json.loads(_unb64(body))
            fingerprint, session_id, expires = payload["k"], payload["s"], payload["e"]
        except (ValueError, KeyError, TypeError):
            return None
        if not isinstance(expires, int) or expires <= self._now():
            return None
        api_key = self._keys.get(fingerprint) if isinstance(fingerprint, str) else None
        if api_key is None or not isinstance(session_id, str):
            return None
        return Session(api_key, session_id, expires)

    # --- CSRF -----------------------------------------------------------------------------

    def csrf_token(self, session_id: str) -> str:
        """The token every form of this session carries."""
        return _b64(self._mac("csrf", session_id.encode()))

    def csrf_ok(self, session_id: str, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(
            given.encode(), self.csrf_token(session_id).encode()
        )

    @staticmethod
    def new_nonce() -> str:
        """A random nonce for the sign-in form's cookie."""
        return secrets.token_urlsafe(18)

    def login_token(self, nonce: str) -> str:
        """The sign-in form's CSRF token, tied to the nonce in its cookie."""
        return _b64(self._mac("login", nonce.encode()))

    def login_ok(self, nonce: str | None, given: str | None) -> bool:
        return (
            nonce is not None
            and given is not None
            and hmac.compare_digest(given.encode(), self.login_token(nonce).encode())
        )
