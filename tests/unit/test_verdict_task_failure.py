"""The task's own failure, as the worker marks it (the jobgate-task-failure header on a single
push's answer, ``task_failure`` in a batch result): read like the same answer unmarked, but
flagged so that it does not count against the endpoint's circuit breaker."""

from __future__ import annotations

import pytest

from gateway.dispatch.verdict import Answer, batch_answers, judge
from sdk.wire import AttemptOutcome, BatchAnswer, BatchResult, ErrorIn, FailureKind

JSON = "application/json"
RAISED = ErrorIn(error="KeyError: 'x'", traceback="Traceback ...").model_dump_json().encode()


@pytest.mark.parametrize(
    ("status", "outcome"),
    [(500, AttemptOutcome.ERROR), (502, AttemptOutcome.ERROR), (422, AttemptOutcome.FAILED)],
)
def test_a_marked_error_is_the_tasks_failure_with_no_failure_kind(
    status: int, outcome: AttemptOutcome
) -> None:
    verdict = judge(Answer(status, RAISED, JSON, task_failure=True))
    assert (verdict.outcome, verdict.task_failure, verdict.failure) == (outcome, True, None)
    assert (verdict.text, verdict.traceback) == ("KeyError: 'x'", "Traceback ...")


def test_a_marked_error_without_a_body_is_still_the_tasks_failure() -> None:
    verdict = judge(Answer(500, b"boom", "text/plain", task_failure=True))
    assert (verdict.outcome, verdict.task_failure) == (AttemptOutcome.ERROR, True)
    assert verdict.text == "worker answered 500: boom"


@pytest.mark.parametrize(
    ("body", "kind"),
    [(b"Internal Server Error", FailureKind.SERVER_ERROR), (RAISED, None)],
)
def test_an_unmarked_5xx_is_evidence_against_the_endpoint(
    body: bytes, kind: FailureKind | None
) -> None:
    # Even an ErrorIn body: without the mark it may be a proxy's or a framework's JSON error.
    verdict = judge(Answer(500, body, JSON))
    assert (verdict.outcome, verdict.task_failure, verdict.failure) == (
        AttemptOutcome.ERROR,
        False,
        kind,
    )


@pytest.mark.parametrize(("status", "outcome"), [(429, "busy"), (503, "busy"), (410, "gone")])
def test_busy_and_gone_ignore_the_mark(status: int, outcome: str) -> None:
    verdict = judge(Answer(status, b"", JSON, task_failure=True))
    assert (verdict.outcome, verdict.task_failure) == (AttemptOutcome(outcome), False)


def test_no_answer_is_never_the_tasks_failure() -> None:
    verdict = judge(Answer(None, failure="no answer within 30s", kind=FailureKind.TIMEOUT))
    assert (verdict.task_failure, verdict.failure) == (False, FailureKind.TIMEOUT)


def test_the_mark_works_per_task_in_a_batch_answer() -> None:
    error = ErrorIn(error="ValueError")
    body = BatchAnswer(
        results=[
            BatchResult(id="a", status=500, error=error, task_failure=True),
            BatchResult(id="b", status=500, error=error),
            BatchResult(id="c", status=200, result=1),
        ]
    ).model_dump_json()
    answers = batch_answers(Answer(200, body.encode(), JSON), ["a", "b", "c"])
    verdicts = [judge(a) for a in answers]
    assert [(v.outcome, v.task_failure) for v in verdicts] == [
        (AttemptOutcome.ERROR, True),
        (AttemptOutcome.ERROR, False),
        (AttemptOutcome.SUCCEEDED, False),
    ]
