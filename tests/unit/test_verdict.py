"""How a worker's answer is read: DESIGN.md's table, and the split of a batch answer."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from gateway.dispatch.pusher import batch_body, push_body
from gateway.dispatch.verdict import Answer, batch_answers, judge, parse_retry_after
from gateway.store.records import Lease
from sdk.wire import AttemptOutcome, PushBatch, PushBody

JSON = "application/json"


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (200, AttemptOutcome.SUCCEEDED),
        (201, AttemptOutcome.SUCCEEDED),
        (204, AttemptOutcome.SUCCEEDED),
        (202, None),
        (429, AttemptOutcome.BUSY),
        (503, AttemptOutcome.BUSY),
        (410, AttemptOutcome.GONE),
        (408, AttemptOutcome.ERROR),
        (500, AttemptOutcome.ERROR),
        (502, AttemptOutcome.ERROR),
        (301, AttemptOutcome.ERROR),
        (400, AttemptOutcome.FAILED),
        (404, AttemptOutcome.FAILED),
        (422, AttemptOutcome.FAILED),
    ],
)
def test_the_answer_table(status: int, outcome: AttemptOutcome | None) -> None:
    assert judge(Answer(status)).outcome is outcome


def test_no_answer_is_a_retryable_error() -> None:
    verdict = judge(Answer(None, failure="no answer within 30s"))
    assert (verdict.outcome, verdict.text) == (AttemptOutcome.ERROR, "no answer within 30s")


def test_success_body_is_the_result_and_non_json_is_kept_as_a_string() -> None:
    assert judge(Answer(200, b'{"a": 1}', JSON)).text == '{"a": 1}'
    assert judge(Answer(204)).text == "null"
    assert json.loads(judge(Answer(200, b"plain text")).text) == "plain text"


@pytest.mark.parametrize("body", [b'{"a": NaN}', b"[Infinity]", b"-Infinity", b"[1e400]"])
def test_a_result_with_nan_or_infinity_is_not_json_and_kept_as_a_string(body: bytes) -> None:
    assert json.loads(judge(Answer(200, body, JSON)).text) == body.decode()


def test_a_batch_result_with_nan_is_not_a_batch_answer() -> None:
    body = b'{"results": [{"id": "a", "status": 200, "result": NaN}]}'
    (answer,) = batch_answers(Answer(200, body, JSON), ["a"])
    assert answer.status is None


def test_error_body_gives_text_traceback_and_delay() -> None:
    body = json.dumps({"error": "boom", "traceback": "tb", "retry_delay": 7}).encode()
    verdict = judge(Answer(500, body, JSON))
    assert (verdict.text, verdict.traceback, verdict.requested_delay) == ("boom", "tb", 7)
    not_retryable = json.dumps({"error": "no", "retryable": False}).encode()
    assert judge(Answer(500, not_retryable, JSON)).outcome is AttemptOutcome.FAILED
    assert judge(Answer(503, b"", "", "12")).requested_delay == 12


def test_retry_after_forms() -> None:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    later = (now + timedelta(seconds=90)).strftime("%a, %d %b %Y %H:%M:%S GMT")
    assert parse_retry_after(later, now) == 90
    assert parse_retry_after("1.5") == 1.5
    assert parse_retry_after("-1") is None
    assert parse_retry_after("soon") is None


def test_batch_answer_is_split_per_task() -> None:
    body = json.dumps(
        {
            "results": [
                {"id": "b", "status": 500, "error": {"error": "boom"}, "retry_after": 2},
                {"id": "a", "status": 200, "result": {"x": 1}},
                {"id": "c", "status": 202},
            ]
        }
    ).encode()
    a, b, c, d = (judge(x) for x in batch_answers(Answer(200, body, JSON), ["a", "b", "c", "d"]))
    assert (a.outcome, json.loads(a.text)) == (AttemptOutcome.SUCCEEDED, {"x": 1})
    assert (b.outcome, b.text, b.requested_delay) == (AttemptOutcome.ERROR, "boom", 2)
    assert c.outcome is None
    assert (d.outcome, d.text) == (
        AttemptOutcome.ERROR,
        "the task is missing from the batch answer",
    )


def test_batch_whole_request_failures_reach_every_task() -> None:
    assert [judge(x).outcome for x in batch_answers(Answer(503), ["a", "b"])] == [
        AttemptOutcome.BUSY
    ] * 2
    bad = batch_answers(Answer(200, b'{"not": "a batch answer"}', JSON), ["a"])
    assert judge(bad[0]).outcome is AttemptOutcome.ERROR


def lease(task_id: str, checkpoint: str | None = None) -> Lease:
    return Lease(
        queue="q",
        task_id=task_id,
        endpoint_id="ep",
        token=f"token-{task_id}",
        name="mod.fn",
        attempt=2,
        max_attempts=None,
        payload_json='{"args": ["x\\"y"], "kwargs": {}}',
        checkpoint_json=checkpoint,
        expires_ms=1_800_000_000_000,
        deadline_ms=1_800_000_060_000,
        traceparent=None,
    )


def test_push_bodies_match_the_wire_models() -> None:
    single = PushBody.model_validate_json(push_body(lease("a", '{"step": 3}')))
    assert (single.id, single.attempt, single.checkpoint) == ("a", 2, {"step": 3})
    assert single.payload == {"args": ['x"y'], "kwargs": {}}
    batch = PushBatch.model_validate_json(batch_body([lease("a"), lease("b")], "http://gw"))
    assert [(t.id, t.lease, t.callback) for t in batch.tasks] == [
        ("a", "token-a", "http://gw/v1/callbacks/q/a"),
        ("b", "token-b", "http://gw/v1/callbacks/q/b"),
    ]


def test_a_push_carries_recorded_steps_only_when_there_are_some() -> None:
    steps = '[{"name":"charge","result":{"id":7},"attempt":1,"recorded_ms":1800000000000}]'
    with_steps = PushBody.model_validate_json(push_body(replace(lease("a"), steps_json=steps)))
    assert with_steps.steps is not None
    assert [(s.name, s.result, s.attempt) for s in with_steps.steps] == [("charge", {"id": 7}, 1)]
    assert '"steps"' not in push_body(lease("a"))
