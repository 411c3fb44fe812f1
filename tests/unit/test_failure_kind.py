"""The failure kind the answer table gives each answer (the redrive policy filters on it)."""

from __future__ import annotations

import aiohttp
import pytest

from gateway.dispatch.pusher import no_answer_kind
from gateway.dispatch.verdict import Answer, batch_answers, judge
from gateway.security.ssrf import AddressRefused
from sdk.wire import ErrorIn, FailureKind

JSON = "application/json"
OWN_REPORT = ErrorIn(error="ValueError: x", retryable=True).model_dump_json().encode()


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (200, None),
        (202, None),
        (307, None),
        (400, None),
        (408, FailureKind.TIMEOUT),
        (410, None),
        (422, None),
        (429, None),
        (500, FailureKind.SERVER_ERROR),
        (502, FailureKind.SERVER_ERROR),
        (503, FailureKind.SERVER_ERROR),
        (504, FailureKind.SERVER_ERROR),
    ],
)
def test_kind_by_status(status: int, kind: FailureKind | None) -> None:
    assert judge(Answer(status, b"<html>oops</html>", "text/html")).failure is kind


@pytest.mark.parametrize("status", [408, 500, 503])
def test_the_workers_own_error_report_has_no_kind(status: int) -> None:
    assert judge(Answer(status, OWN_REPORT, JSON)).failure is None
    # A JSON body that is not an ErrorIn (a proxy's, a framework's) is no report of the worker.
    assert judge(Answer(status, b'{"detail": "boom"}', JSON)).failure is not None


def test_no_answer_keeps_the_pushers_kind() -> None:
    timed_out = Answer(None, failure="no answer within 1s", kind=FailureKind.TIMEOUT)
    assert judge(timed_out).failure is FailureKind.TIMEOUT
    refused = Answer(None, failure="ClientConnectorError", kind=FailureKind.CONNECTION)
    assert judge(refused).failure is FailureKind.CONNECTION
    (malformed,) = batch_answers(Answer(200, b"not a batch answer", JSON), ["a"])
    assert judge(malformed).failure is None  # the worker answered: not an infrastructure fault


def test_batch_results_get_the_kind_of_their_own_status() -> None:
    body = (
        b'{"results": [{"id": "a", "status": 502}, {"id": "b", "status": 500, "error": '
        + OWN_REPORT
        + b'}, {"id": "c", "status": 408}]}'
    )
    kinds = [judge(a).failure for a in batch_answers(Answer(200, body, JSON), ["a", "b", "c"])]
    assert kinds == [FailureKind.SERVER_ERROR, None, FailureKind.TIMEOUT]


def test_a_push_with_no_answer_is_a_connection_failure_unless_the_ssrf_guard_refused() -> None:
    assert no_answer_kind(aiohttp.ServerDisconnectedError()) is FailureKind.CONNECTION
    assert no_answer_kind(ConnectionResetError()) is FailureKind.CONNECTION
    assert no_answer_kind(AddressRefused("10.0.0.1 is private")) is None
