"""A success answered with a warning: the inline header and a batch result's field."""

from __future__ import annotations

from gateway.dispatch.verdict import Answer, batch_answers, judge
from sdk.wire import AttemptOutcome, BatchAnswer, BatchResult


def test_a_success_keeps_the_answers_warning() -> None:
    verdict = judge(Answer(200, b"[1]", "application/json", warning="2 rows skipped"))
    assert (verdict.outcome, verdict.text, verdict.warning) == (
        AttemptOutcome.SUCCEEDED,
        "[1]",
        "2 rows skipped",
    )
    assert judge(Answer(200, b"1")).warning == ""


def test_an_error_ignores_a_warning() -> None:
    assert judge(Answer(500, b"", warning="odd")).warning == ""


def test_a_batch_results_warning_reaches_its_task() -> None:
    body = BatchAnswer(
        results=[
            BatchResult(id="a", status=200, result=1, warning="careful"),
            BatchResult(id="b", status=200, result=2),
        ]
    ).model_dump_json()
    a, b = batch_answers(Answer(200, body.encode(), "application/json"), ["a", "b"])
    assert judge(a).warning == "careful"
    assert judge(b).warning == ""
