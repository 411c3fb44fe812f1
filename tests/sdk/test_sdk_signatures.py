"""Signatures made in one HMAC call are standardwebhooks' own, and the verifier's quick check
accepts what standardwebhooks accepts and leaves every refusal, with its reason, to it."""

from __future__ import annotations

import base64
import time
from datetime import UTC, datetime

import pytest
from standardwebhooks import Webhook

from sdk.errors import SignatureError
from sdk.signatures import Verifier, secret_key, signature

SECRET = "whsec_" + base64.b64encode(b"k" * 24).decode()
OTHER = "whsec_" + base64.b64encode(b"o" * 24).decode()
BODY = '{"id":"01J","payload":{"text":"\u00e9t\u00e9 \u2603"}}'.encode()


def headers(
    secrets: list[str], seconds: int, body: bytes = BODY, mid: str = "01J"
) -> dict[str, str]:
    at = datetime.fromtimestamp(seconds, tz=UTC)
    signed = " ".join(Webhook(s).sign(mid, at, body.decode()) for s in secrets)
    return {"webhook-id": mid, "webhook-timestamp": str(seconds), "webhook-signature": signed}


@pytest.mark.parametrize("secret", [SECRET, SECRET.removeprefix("whsec_").rstrip("=")])
@pytest.mark.parametrize("body", [b"", b"null", BODY, b"x" * 70_000])
def test_a_signature_is_standardwebhooks_own(secret: str, body: bytes) -> None:
    seconds = int(time.time())
    expected = Webhook(secret).sign("msg_1", datetime.fromtimestamp(seconds, tz=UTC), body.decode())
    assert signature(secret_key(secret), "msg_1", seconds, body) == expected


def test_the_quick_check_accepts_a_push_signed_by_any_given_secret() -> None:
    now = int(time.time())
    verifier = Verifier([OTHER, SECRET])
    for signing in ([SECRET], [OTHER], [SECRET, OTHER], [OTHER, SECRET]):
        assert verifier._signed(BODY, headers(signing, now))
        verifier.verify(BODY, headers(signing, now))


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"webhook-signature": None}, "Missing required headers"),
        ({"webhook-timestamp": "soon"}, "Invalid Signature Headers"),
        ({"webhook-timestamp": "nan"}, "Invalid Signature Headers"),
        ({"webhook-timestamp": -400}, "Message timestamp too old"),  # seconds from now
        ({"webhook-timestamp": 400}, "Message timestamp too new"),
        ({"webhook-id": "01K"}, "No matching signature found"),
        ({"webhook-signature": "v2,abc"}, "No matching signature found"),
    ],
)
def test_a_refusal_and_its_reason_are_standardwebhooks(
    change: dict[str, str | int | None], reason: str
) -> None:
    now = int(time.time())
    given = headers([SECRET], now)
    for name, value in change.items():
        if value is None:
            del given[name]
        else:
            given[name] = str(now + value) if isinstance(value, int) else value
    verifier = Verifier(SECRET)
    assert not verifier._signed(BODY, given)
    with pytest.raises(SignatureError, match=reason):
        verifier.verify(BODY, given)


def test_another_secret_or_body_is_refused() -> None:
    given = headers([OTHER], int(time.time()))
    with pytest.raises(SignatureError, match="No matching signature"):
        Verifier(SECRET).verify(BODY, given)
    with pytest.raises(SignatureError, match="No matching signature"):
        Verifier(OTHER).verify(BODY + b" ", given)
