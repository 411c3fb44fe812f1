"""Which routes take an Idempotency-Key, how the OpenAPI document shows it, and which header
values are accepted."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from gateway.api import OPERATIONS
from gateway.api.idempotency import HEADER, REPLAYED, fingerprint, requested_key
from gateway.api.openapi import build_openapi
from gateway.core.errors import InvalidRequest
from gateway.store.idempotency import slot


def request_with(value: bytes | None) -> Request:
    headers = [] if value is None else [(b"idempotency-key", value)]
    return Request({"type": "http", "method": "POST", "path": "/", "headers": headers})


def test_every_post_but_worker_callbacks_takes_the_header() -> None:
    doc = build_openapi()
    covered = set()
    for op in OPERATIONS:
        entry = doc["paths"][op.path][op.method.lower()]
        names = [p["name"] for p in entry.get("parameters", [])]
        expected = op.method == "POST" and not op.path.startswith("/v1/callbacks/")
        assert op.idempotent is expected, op.path
        assert (HEADER in names) is expected, op.path
        if expected:
            covered.add(op.path)
            assert {"400", "409", "422"} <= set(entry["responses"])
            assert REPLAYED in entry["responses"][str(op.status)]["headers"]
            if op.status == 201:
                assert REPLAYED in entry["responses"]["200"]["headers"]
    assert "/v1/queues/{queue}/tasks" in covered
    assert "/v1/tasks/{task_id}/cancel" in covered


@pytest.mark.parametrize("value", [b"a", b"order-42", b"x" * 255, b"with space", b"~!@#$%^&*()"])
def test_printable_ascii_keys_up_to_255_are_accepted(value: bytes) -> None:
    assert requested_key(request_with(value)) == value.decode()


@pytest.mark.parametrize("value", [b"", b"   ", b"x" * 256, b"caf\xc3\xa9", b"a\tb", b"a\x7f"])
def test_other_keys_are_refused_naming_the_header(value: bytes) -> None:
    with pytest.raises(InvalidRequest, match=HEADER) as raised:
        requested_key(request_with(value))
    assert raised.value.status == 400


def test_no_header_means_no_key() -> None:
    assert requested_key(request_with(None)) is None


def test_fingerprints_and_slots_tell_requests_apart() -> None:
    assert fingerprint("", b"{}") == fingerprint("", b"{}")
    assert len({fingerprint("", b"{}"), fingerprint("", b"{ }"), fingerprint("a=1", b"{}")}) == 3
    one = slot("ops", "POST", "/v1/queues/q/tasks", "k")
    assert one.startswith("jg:idem:")
    assert len(one) == len("jg:idem:") + 64
    others = {
        slot("mailer", "POST", "/v1/queues/q/tasks", "k"),
        slot("ops", "POST", "/v1/queues/r/tasks", "k"),
        slot("ops", "POST", "/v1/queues/q/tasks", "k2"),
    }
    assert one not in others
    assert len(others) == 3
