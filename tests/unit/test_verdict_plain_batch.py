"""The shortcuts of a batch push's plain successes: the gateway reads a batch answer of them with
orjson alone and gives each task the answer, and so the verdict, that the ``BatchAnswer`` model's
reading gives; the SDK worker writes them as the model would."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.dispatch import verdict
from gateway.dispatch.verdict import Answer, batch_answers, judge
from sdk.outcomes import ACCEPTED, Outcome, Refusal, Verdict, busy, success
from sdk.pushes import Delivery, Push, batch_result
from sdk.warnings import Warn
from sdk.wire import BatchAnswer, PushBody, ResultIn

JSON = "application/json"
IDS = ["a", "b", "c"]

PLAIN = {"id": "a", "status": 200, "result": None}
FULL = {
    "id": "a",
    "status": 200,
    "result": None,
    "warning": None,
    "error": None,
    "retry_after": None,
    "task_failure": False,
}


def by_model(body: bytes, ids: list[str], monkeypatch: pytest.MonkeyPatch) -> list[Answer]:
    """The answers as the model alone reads them (the shortcut declines everything)."""
    with monkeypatch.context() as m:
        m.setattr(verdict, "_plain_results", lambda body: (None, False))
        return batch_answers(Answer(200, body, JSON), ids)


def results(*items: dict[str, Any]) -> bytes:
    return json.dumps({"results": list(items)}).encode()


BODIES = [
    results(PLAIN, {**PLAIN, "id": "b"}, {**PLAIN, "id": "c"}),
    results(FULL, {**FULL, "id": "b", "status": 204}, {**FULL, "id": "c", "status": 202}),
    results({"id": "a", "status": 200}),  # result left out: null
    results(PLAIN, {**PLAIN, "id": "a", "status": 201}),  # the last of the same id counts
    results(PLAIN, {**PLAIN, "id": "b", "extra": 1}),  # an unknown field: the model ignores it
    results(PLAIN, {**PLAIN, "id": "b", "result": {"x": [1, 2.5]}}),
    results(PLAIN, {**PLAIN, "id": "b", "result": 2**70}),
    results(PLAIN, {**PLAIN, "id": "b", "warning": "careful"}),
    results(PLAIN, {**PLAIN, "id": "b", "status": 500, "error": {"error": "boom"}}),
    results(PLAIN, {**PLAIN, "id": "b", "status": 503, "retry_after": 2.5}),
    results(PLAIN, {**PLAIN, "id": "b", "status": 500, "task_failure": True}),
    results(PLAIN, {**PLAIN, "id": "b", "task_failure": 0}),
    results(PLAIN, {**PLAIN, "id": "b", "status": "200"}),
    results(PLAIN, {**PLAIN, "id": "b", "status": 200.0}),
    results(PLAIN, {**PLAIN, "id": "b", "status": True}),
    results(PLAIN, {**PLAIN, "id": "b", "status": 99}),
    results(PLAIN, {**PLAIN, "id": 7}),
    results(PLAIN, {"status": 200}),
    results(PLAIN, "b"),
    json.dumps({"results": {"a": PLAIN}}).encode(),
    json.dumps({"results": [PLAIN], "more": True}).encode(),
    json.dumps([PLAIN]).encode(),
    b'{"results":[{"id":"a","status":200,"result":NaN}]}',
    b'{"results":[{"id":"a","status":200,"result":1e400}]}',
    b'{"results":[{"id":"a","status":200,"result":"\\ud800"}]}',
    b'{"results":[{"id":"a","status":200}',
    b"",
]


@pytest.mark.parametrize("body", BODIES)
def test_the_shortcut_reads_every_answer_as_the_model_does(
    body: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = batch_answers(Answer(200, body, JSON), IDS)
    assert fast == by_model(body, IDS, monkeypatch)
    assert [judge(a) for a in fast] == [judge(a) for a in by_model(body, IDS, monkeypatch)]


def test_plain_successes_take_the_shortcut_and_share_their_answer() -> None:
    body = results(FULL, {**FULL, "id": "b"}, {**PLAIN, "id": "c", "status": 204})
    plain, finite = verdict._plain_results(body)
    assert finite
    assert plain is not None
    a, b, c = batch_answers(Answer(200, body, JSON), IDS)
    assert a is b  # one answer for every null 200 result
    assert judge(a) is judge(b)
    assert judge(a) == judge(Answer(200, b"null", JSON))
    assert (c.status, c.body) == (204, b"null")


@pytest.mark.parametrize(
    "body",
    [
        results(PLAIN, {**PLAIN, "id": "b", "result": 1}),
        results(PLAIN, {**PLAIN, "id": "b", "status": 503}),
        results(PLAIN, {**PLAIN, "id": "b", "task_failure": True}),
    ],
)
def test_anything_but_plain_successes_goes_to_the_model(body: bytes) -> None:
    assert verdict._plain_results(body) == (None, True)


def outcomes() -> list[Outcome]:
    return [
        success(None),
        success(True),
        success(-3),
        success(2**70),
        success('héllo\n"quoted" \u2028'),
        success(1.5),
        success({"x": [1, None]}),
        success([1, 2]),
        ACCEPTED,
        busy(1.0),
        Refusal(404, "Unknown task", "no such task"),
    ]


def test_the_worker_writes_each_result_as_the_batch_answer_model_does() -> None:
    push = PushBody.model_validate(
        {
            "id": "01JDZ8ZK6W0000000000000000",
            "queue": "q",
            "name": "t",
            "payload": None,
            "attempt": 1,
            "checkpoint": None,
            "lease_expires_at": "2030-01-01T00:00:00Z",
            "deadline": "2030-01-01T01:00:00Z",
        }
    )
    given = outcomes()
    deliveries = tuple(Delivery(push, "lease", "http://cb") for _ in given)
    written = Push(deliveries, batch=True).answer(given).body
    model = BatchAnswer(results=[batch_result(push.id, o) for o in given]).model_dump_json()
    assert json.loads(written) == json.loads(model)
    assert BatchAnswer.model_validate_json(written) == BatchAnswer.model_validate_json(model)


def test_a_task_returning_nothing_shares_one_verdict_equal_to_a_built_one() -> None:
    assert success(None) is success(None)
    assert success(None) == Verdict(200, ResultIn(result=None))
    assert success(None).body == b"null"
    assert success(Warn("careful")).final == ResultIn(result=None, warning="careful")


def _result_json_by_json(body: bytes) -> str:
    """How a success's result was read before orjson looked first (json alone)."""

    def no_constants(word: str) -> None:
        raise ValueError(word)

    if not body.strip() or body == b"null":
        return "null"
    try:
        json.dumps(json.loads(body, parse_constant=no_constants), allow_nan=False)
    except ValueError:
        return json.dumps(body.decode("utf-8", "replace"))
    return body.decode()


@pytest.mark.parametrize(
    "body",
    [
        b'{"a": [1, 2.5, "x"]}',
        b" 7 ",
        b'"\xc3\xa9"',
        b"18446744073709551616",
        b"1e400",
        b"NaN",
        b"[Infinity]",
        b'"\\ud800"',
        b"\xef\xbb\xbf1",
        b"not json",
        b"[1,]",
        b"   ",
        b"",
    ],
)
def test_a_success_result_reads_as_json_alone_read_it(body: bytes) -> None:
    assert judge(Answer(200, body, JSON)).text == _result_json_by_json(body)
