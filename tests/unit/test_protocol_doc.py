"""docs/protocol.md stays true to the code: its example push is a real push (a test vector a
worker in another language can check its HMAC against), and its tables name every header, body
field and callback the code has."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from datetime import UTC, datetime
from pathlib import Path

from standardwebhooks import Webhook

from gateway.api.callbacks import OPERATIONS
from gateway.dispatch.pusher import push_body
from gateway.store.records import Lease
from sdk.wire import (
    HEADER_ATTEMPT,
    HEADER_BATCH,
    HEADER_CALLBACK,
    HEADER_LEASE,
    HEADER_TASK_FAILURE,
    HEADER_WARNING,
    BatchItem,
    BatchResult,
    PushBody,
)

DOC = (Path(__file__).parents[2] / "docs" / "protocol.md").read_text()
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def example_push() -> tuple[dict[str, str], str]:
    """The headers and body of the ``http`` block under "The push"."""
    block = DOC.split("## The push", 1)[1].split("```http\n", 1)[1].split("\n```", 1)[0]
    head, body = block.split("\n\n", 1)
    headers = dict(line.split(": ", 1) for line in head.splitlines()[1:])
    return headers, body


def test_the_example_push_is_signed_as_the_gateway_signs() -> None:
    headers, body = example_push()
    when = datetime.fromtimestamp(int(headers["webhook-timestamp"]), tz=UTC)
    signature = Webhook(SECRET).sign(headers["webhook-id"], when, body)
    assert headers["webhook-signature"] == signature
    assert f"`{SECRET}`" in DOC
    assert f"`{signature}`" in DOC
    assert PushBody.model_validate_json(body).id == headers["webhook-id"]


def test_the_example_body_is_byte_for_byte_what_the_gateway_sends() -> None:
    _, body = example_push()
    push = PushBody.model_validate_json(body)
    lease = Lease(
        task_id=push.id,
        queue=push.queue,
        name=push.name,
        payload_json='{"args":["ada@example.com"],"kwargs":{}}',
        attempt=push.attempt,
        max_attempts=None,
        checkpoint_json=None,
        expires_ms=int(push.lease_expires_at.timestamp() * 1000),
        deadline_ms=int(push.deadline.timestamp() * 1000),
        token="t",
        endpoint_id="e",
        traceparent=None,
    )
    assert push_body(lease) == body


def test_the_documented_steps_compute_the_signature() -> None:
    """Steps 1-3 of "Verifying the signature", with nothing but the standard library."""
    headers, body = example_push()
    key = base64.b64decode(SECRET.removeprefix("whsec_"))
    content = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body.encode()
    digest = hmac.new(key, content, hashlib.sha256).digest()
    assert headers["webhook-signature"] == "v1," + base64.b64encode(digest).decode()


def _first_column(section: str) -> set[str]:
    """The backticked names in the first column of the tables of a section."""
    text = DOC.split(section, 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([a-z_-]+)` \|", text, flags=re.MULTILINE))


def test_every_header_field_and_callback_is_documented() -> None:
    push = _first_column("## The push")
    assert {HEADER_ATTEMPT, HEADER_LEASE, HEADER_CALLBACK, "traceparent"} <= push
    assert {"webhook-id", "webhook-timestamp", "webhook-signature"} <= push
    assert set(PushBody.model_fields) <= push
    assert f"`{HEADER_BATCH}: " in DOC
    assert f"`{HEADER_WARNING}`" in DOC
    assert f"`{HEADER_TASK_FAILURE}: 1`" in DOC
    item_fields = {"lease", "callback", "traceparent", "tracestate"}
    assert {f'"{name}"' for name in item_fields} <= set(re.findall(r'"[a-z]+"', DOC))
    assert set(BatchItem.model_fields) - set(PushBody.model_fields) == item_fields
    assert all(f"`{name}`" in DOC for name in BatchResult.model_fields)
    kinds = {op.path.rsplit("/", 1)[1] for op in OPERATIONS}
    assert kinds == _first_column("## Callbacks") & kinds
    assert kinds == {
        "heartbeat",
        "checkpoint",
        "logs",
        "result",
        "error",
        "release",
        "step",
        "sleep",
        "wait",
        "invoke",
        "call",
    }
