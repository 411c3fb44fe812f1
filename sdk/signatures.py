"""Standard Webhooks signatures of a push: made (:func:`signature`, the gateway's pushes) and
verified against one or more endpoint secrets (:class:`Verifier`, the worker's side).

Several secrets let an endpoint rotate its secret with an overlap: a push signed with any of
them is accepted. Timestamps more than five minutes away from now are refused (replays).

Both sides compute the HMAC in one C call (``hmac.digest``) over the body's bytes as they are.
``standardwebhooks`` builds an ``hmac.HMAC`` object per call, and its ``verify`` decodes the
body to text and encodes it again and makes datetimes: about 27 µs per single push against
about 15 (bench/RESULTS.md, "CPU per task in the drain"). A push that the quick check does not
accept is handed to ``standardwebhooks``, whose verdict and reason stand, so nothing it refuses
is accepted for a reason of this module's own.
"""

from __future__ import annotations

import base64
import hmac
import math
import time
from collections.abc import Mapping, Sequence

from standardwebhooks import Webhook, WebhookVerificationError

from sdk.errors import SignatureError

__all__ = ["Verifier", "secret_key", "signature"]

SECRET_PREFIX = "whsec_"
TOLERANCE_SECONDS = 5 * 60


def secret_key(secret: str) -> bytes:
    """The HMAC key of a ``whsec_…`` secret (unpadded base64 allowed, as standardwebhooks)."""
    if secret.startswith(SECRET_PREFIX):
        secret = secret[len(SECRET_PREFIX) :]
    return base64.b64decode(secret + "==")


def signature(key: bytes, message_id: str, seconds: int, body: bytes) -> str:
    """The ``v1,<base64 HMAC-SHA256 of id.timestamp.body>`` of one secret's key."""
    signed = b"%s.%d.%s" % (message_id.encode(), seconds, body)
    return "v1," + base64.b64encode(hmac.digest(key, signed, "sha256")).decode()


class Verifier:
    """Checks ``webhook-id``, ``webhook-timestamp`` and ``webhook-signature`` of a push."""

    def __init__(self, secrets: str | Sequence[str]) -> None:
        secrets = [secrets] if isinstance(secrets, str) else list(secrets)
        if not secrets:
            raise ValueError("give at least one signing secret ('whsec_...')")
        try:
            self._webhooks = [Webhook(secret) for secret in secrets]
            self._keys = [secret_key(secret) for secret in secrets]
        except Exception as e:  # a bad secret fails at startup, not on the first push
            raise ValueError(f"not a signing secret ('whsec_' + base64): {e}") from e

    def verify(self, body: bytes, headers: Mapping[str, str]) -> None:
        """Return if any secret verifies the push, else raise :class:`SignatureError`."""
        self.verify_lowered(body, {key.lower(): value for key, value in headers.items()})

    def verify_lowered(self, body: bytes, lowered: dict[str, str]) -> None:
        """:meth:`verify`, for headers already keyed by lower-case names (ASGI's)."""
        if self._signed(body, lowered):
            return
        reason = "no signature"
        for webhook in self._webhooks:
            try:
                webhook.verify(body, lowered, json_parse=False)
            except (WebhookVerificationError, ValueError) as e:
                reason = str(e) or type(e).__name__
            else:
                return
        raise SignatureError(reason)

    def _signed(self, body: bytes, lowered: Mapping[str, str]) -> bool:
        """The quick check: a timestamp within the tolerance and a ``v1`` signature of one of
        the secrets among those given. False is no verdict: standardwebhooks then decides."""
        message_id = lowered.get("webhook-id")
        stamp = lowered.get("webhook-timestamp")
        given = lowered.get("webhook-signature")
        if not (message_id and stamp and given):
            return False
        try:
            seconds = float(stamp)
        except ValueError:
            return False
        if not abs(seconds - time.time()) <= TOLERANCE_SECONDS:  # NaN is not either
            return False
        passed = [token.encode("utf-8", "replace") for token in given.split(" ")]
        for key in self._keys:
            expected = signature(key, message_id, math.floor(seconds), body).encode()
            if any(hmac.compare_digest(expected, token) for token in passed):
                return True
        return False
