"""Verifying a push's Standard Webhooks signature against one or more endpoint secrets.

Several secrets let an endpoint rotate its secret with an overlap: a push signed with any of
them is accepted. Timestamps more than five minutes away from now are refused (replays).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from standardwebhooks import Webhook, WebhookVerificationError

from sdk.errors import SignatureError

__all__ = ["Verifier"]


class Verifier:
    """Checks ``webhook-id``, ``webhook-timestamp`` and ``webhook-signature`` of a push."""

    def __init__(self, secrets: str | Sequence[str]) -> None:
        secrets = [secrets] if isinstance(secrets, str) else list(secrets)
        if not secrets:
            raise ValueError("give at least one signing secret ('whsec_...')")
        try:
            self._webhooks = [Webhook(secret) for secret in secrets]
        except Exception as e:  # a bad secret fails at startup, not on the first push
            raise ValueError(f"not a signing secret ('whsec_' + base64): {e}") from e

    def verify(self, body: bytes, headers: Mapping[str, str]) -> None:
        """Return if any secret verifies the push, else raise :class:`SignatureError`."""
        self.verify_lowered(body, {key.lower(): value for key, value in headers.items()})

    def verify_lowered(self, body: bytes, lowered: dict[str, str]) -> None:
        """:meth:`verify`, for headers already keyed by lower-case names (ASGI's)."""
        reason = "no signature"
        for webhook in self._webhooks:
            try:
                webhook.verify(body, lowered, json_parse=False)
            except (WebhookVerificationError, ValueError) as e:
                reason = str(e) or type(e).__name__
            else:
                return
        raise SignatureError(reason)
