"""read_claim builds each Lease positionally, reading the stored record's defaults itself: every
field is what a Lease made by keywords from load_record's whole record holds, for records with
and without their optional and defaulted fields."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gateway.store.records import Lease, load_record
from gateway.store.tasks.leases import ClaimStatus, read_claim

NOW = 1_795_748_146_592


def by_keywords(queue: str, row: list[Any]) -> Lease:
    """The lease as read_claim made it by keywords from load_record (before gwbatch2)."""
    task_id, endpoint_id, raw, payload, checkpoint, signing, *steps = row
    record = load_record(raw)
    return Lease(
        queue=queue,
        task_id=task_id,
        endpoint_id=endpoint_id,
        token=record["lease"],
        name=record["name"],
        attempt=record["att"],
        max_attempts=record.get("max_att"),
        payload_json=payload if payload is not None else "null",
        checkpoint_json=checkpoint,
        expires_ms=int(record["exp"]),
        deadline_ms=int(record["deadline"]),
        traceparent=record.get("tp"),
        tracestate=record.get("ts"),
        ready_ms=int(max(record.get("run_at", 0), record.get("created", 0))),
        started_ms=int(record.get("started", 0)),
        version=record.get("ver") or "",
        secrets=tuple(signing.split()),
        steps_json=steps[0] if steps else None,
        results_from=tuple((q, i) for q, i in record["rs"]) if "rs" in record else (),
    )


LEAN = {
    "first": NOW,
    "exp": NOW + 30_000,
    "state": "running",
    "name": "t",
    "deadline": NOW + 3_600_000,
    "run_at": NOW,
    "lease": "tok",
    "ep": "ep0",
}
WHOLE = {
    **LEAN,
    "att": 3,
    "max_att": 5,
    "created": NOW - 10,
    "run_at": NOW - 5,
    "started": NOW + 7,
    "tp": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    "ts": "k=v",
    "ver": "v2",
    "rs": [["q1", "01KAQ30000000000000000000A"], ["q2", "b"]],
    "prio": 4,
}
ROWS = [
    ["01KAQ30000000000000000000B", "ep0", LEAN, '{"args":[]}', None, "whsec_a"],
    ["client-id-ü", "ep1", WHOLE, None, '{"n":1}', "whsec_a whsec_b", '[{"name":"s"}]'],
    ["c", "ep0", {**LEAN, "created": NOW + 9}, "null", None, "whsec_a"],
    ["d", "ep0", {k: v for k, v in LEAN.items() if k not in ("first", "run_at")}, "1", None, ""],
    ["e", "ep0", {**LEAN, "att": 1, "ver": ""}, "[]", None, "whsec_a", None],
]


@pytest.mark.parametrize("encoding", [str, str.encode])
def test_each_lease_is_what_keywords_and_load_record_made(encoding: Any) -> None:
    rows = [[*row[:2], encoding(orjson.dumps(row[2]).decode()), *row[3:]] for row in ROWS]
    claim = read_claim("qü", ["OK", "1", *rows], NOW)
    assert claim.status is ClaimStatus.OK
    assert claim.settled
    assert claim.leases == [by_keywords("qü", row) for row in rows]
    assert claim.leases[1].results_from == (("q1", "01KAQ30000000000000000000A"), ("q2", "b"))
    assert (claim.leases[1].attempt, claim.leases[1].started_ms) == (3, NOW + 7)
    assert (claim.leases[0].attempt, claim.leases[0].started_ms) == (0, NOW)
