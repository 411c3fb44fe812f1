"""The push body's times (gateway/dispatch/pusher.py, ``_iso``): written from a per-second
cache, as ``datetime.isoformat`` writes them."""

from __future__ import annotations

import json
from dataclasses import replace

from gateway.dispatch.pusher import _iso, push_body
from gateway.store.records import Lease, to_datetime


def test_push_body_times_are_written_as_isoformat_writes_them() -> None:
    """Milliseconds with or without a fraction, and exact where ``ms / 1000`` as a float is
    not (far-off deadlines)."""
    for ms in (0, 1, 999, 1_000, 1_800_000_000_000, 1_800_000_000_001, 1_800_000_060_999):
        assert _iso(ms) == to_datetime(ms).isoformat()
    assert _iso(141_183_983_813_483) == "6443-12-10T21:16:53.483000+00:00"
    lease = Lease(
        "q", "a", "e", "t", "n", 1, None, "null", None, 1_800_000_000_000, 1_800_000_060_000, None
    )
    lease = replace(lease, ready_ms=1_799_999_999_500)
    body = json.loads(push_body(lease))
    assert (body["lease_expires_at"], body["deadline"], body["ready_at"]) == (
        "2027-01-15T08:00:00+00:00",
        "2027-01-15T08:01:00+00:00",
        "2027-01-15T07:59:59.500000+00:00",
    )
