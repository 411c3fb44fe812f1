"""Completion callbacks on the producer's side: asking for one, and checking what arrives."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest
import respx
from standardwebhooks import Webhook

from sdk import Client, TaskNotice, TaskState, task, verify_notice
from sdk.errors import SignatureError

URL = "http://gateway.test"
SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@pytest.fixture
def gw() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=URL, assert_all_called=False) as router:
        yield router


def signed(body: bytes, secret: str = SECRET, at: datetime | None = None) -> dict[str, str]:
    at = at or datetime.now(UTC)
    return {
        "webhook-id": "01J00000000000000000000001_1",
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": Webhook(secret).sign(
            "01J00000000000000000000001_1", at, body.decode()
        ),
    }


BODY = json.dumps(
    {
        "id": "01J00000000000000000000001",
        "queue": "emails",
        "name": "send",
        "state": "succeeded",
        "result": {"sent": True},
        "error": None,
        "attempt": 2,
        "finished_at": "2030-01-01T00:00:00Z",
        "owner": None,
    }
).encode()


def test_a_signed_notice_is_read_and_a_forged_or_old_one_refused() -> None:
    notice = verify_notice(BODY, signed(BODY), SECRET)
    assert isinstance(notice, TaskNotice)
    assert (notice.state, notice.result, notice.attempt) == (TaskState.SUCCEEDED, {"sent": True}, 2)
    other = "whsec_" + "A" * 43 + "="
    assert verify_notice(BODY, signed(BODY), [other, SECRET]).id == notice.id  # while switching
    with pytest.raises(SignatureError):
        verify_notice(BODY, signed(BODY, other), SECRET)
    with pytest.raises(SignatureError):
        verify_notice(BODY.replace(b"succeeded", b"failed"), signed(BODY), SECRET)
    old = signed(BODY, at=datetime(2020, 1, 1, tzinfo=UTC))
    with pytest.raises(SignatureError):
        verify_notice(BODY, old, SECRET)


def test_notify_is_an_enqueue_option_and_the_secret_can_be_fetched(gw: respx.MockRouter) -> None:
    client = Client(URL, "key-0123456789abcdef", transport=httpx.HTTPTransport())

    @task("emails", client=client)
    def send(to: str) -> None: ...

    created = send.create(["a@example.com"], notify="https://example.com/done")
    assert created.notify == "https://example.com/done"
    route = gw.get("/v1/queues/emails/notify-secret").respond(
        json={"queue": "emails", "secret": SECRET}
    )
    assert client.notify_secret("emails") == SECRET
    assert route.called
    client.close()


def test_an_admin_rotates_the_notify_secret(gw: respx.MockRouter) -> None:
    client = Client(URL, "key-0123456789abcdef", transport=httpx.HTTPTransport())
    until = "2030-01-02T00:00:00Z"
    route = gw.post("/v1/queues/emails/notify-secret").respond(
        json={"queue": "emails", "secret": SECRET, "previous_secret_until": until}
    )
    rotated = client.rotate_notify_secret("emails", overlap=3600)
    assert (rotated.secret, rotated.previous_secret_until) == (
        SECRET,
        datetime(2030, 1, 2, tzinfo=UTC),
    )
    assert json.loads(route.calls.last.request.content) == {"overlap": 3600}
    client.close()
