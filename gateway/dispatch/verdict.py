"""How a worker's answer to a push is read: the table of DESIGN.md, as one pure function.

=====================================  ==========================================================
answer                                 verdict
=====================================  ==========================================================
200, 201, 204 (any 2xx but 202)        succeeded; the JSON body, if any, is the result (and the
                                       jobgate-warning header, if any, a warning)
202                                    accepted; the worker calls back, heartbeats keep the lease
429, 503                               busy: retry after Retry-After, no attempt spent
410                                    gone: disable the endpoint, the task goes back untouched
408, other 5xx, 3xx, timeout, refused  error: retry with the queue's backoff
other 4xx                              failed, not retried
=====================================  ==========================================================

An error answer may carry a JSON body shaped like ``ErrorIn`` (error, traceback, retryable,
retry_delay); a worker saying ``retryable: false`` turns a retry into a failure.

An error answer (408, a 5xx but 503, a 4xx but 410 and 429) marked as the task's own failure
— the ``jobgate-task-failure: 1`` header, or ``task_failure`` in a batch result — is read as
above but flagged ``task_failure``, with no failure kind: the task raised and the endpoint
answered properly, so the attempt counts as the endpoint's success, never against its circuit
breaker. A busy answer (429, 503), a 410 and a redirect ignore the mark.

A failed attempt also gets a failure kind (``FailureKind``), which a queue's redrive policy
filters on: ``timeout`` (no answer within the push timeout, or a 408), ``5xx`` (an answer >= 500)
and ``connection`` (no HTTP answer: refused, reset, DNS, TLS). A 5xx whose body is an ``ErrorIn``
is the worker's own report of a task that raised (the SDK answers so): it has no kind, like a
refusal (4xx), a redirect or an error callback, since resubmitting it would fail the same way.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import orjson
from pydantic import ValidationError

from gateway.store.records import dump_json
from sdk.wire import AttemptOutcome, BatchAnswer, ErrorIn, FailureKind
from sdk.wire.base import FINITE_JSON

MAX_ERROR_TEXT = 4096


@dataclass(frozen=True, slots=True)
class Answer:
    """What came back from one push: an HTTP answer, or the reason there was none."""

    status: int | None
    body: bytes = b""
    content_type: str = ""
    retry_after: str | None = None
    failure: str | None = None  # timeout or connection error, when status is None
    warning: str | None = None  # a success's warning (the jobgate-warning header, decoded)
    kind: FailureKind | None = None  # timeout or connection, when status is None
    task_failure: bool = False  # the worker marked the error as the task's own


@dataclass(frozen=True, slots=True)
class Verdict:
    outcome: AttemptOutcome | None  # None: accepted (202), the attempt goes on
    http_status: int | None = None
    text: str = ""  # result JSON when succeeded, else the error text
    traceback: str = ""
    requested_delay: float | None = None
    warning: str = ""  # succeeded, with this warning
    failure: FailureKind | None = None  # an infrastructure failure's kind (redrive filters on it)
    task_failure: bool = False  # the task's own failure: no evidence against the endpoint


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds from a Retry-After header: delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return seconds if seconds >= 0 else None
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _no_constants(word: str) -> None:
    raise ValueError(f"JSON has no {word}")


def _result_json(answer: Answer) -> str:
    """The result a 2xx answer carries: its body when that is JSON, else the body as a JSON
    string. NaN and Infinity are not JSON (they would read back as null)."""
    if not answer.body.strip():
        return "null"
    if answer.body == b"null":  # a task returning nothing: the common answer
        return "null"
    try:  # a fraction of json's cost; what it reads, json reads too (finite numbers only)
        orjson.loads(answer.body)
    except orjson.JSONDecodeError:
        pass  # json decides (it reads some bodies orjson does not: a BOM, UTF-16, surrogates)
    else:
        return answer.body.decode()
    try:
        json.dumps(json.loads(answer.body, parse_constant=_no_constants), allow_nan=False)
    except ValueError:
        return json.dumps(answer.body.decode("utf-8", "replace"))
    return answer.body.decode()


def _error(
    answer: Answer, outcome: AttemptOutcome, fallback: str, kind: FailureKind | None = None
) -> Verdict:
    """An error answer's verdict; ``kind`` is its failure kind unless the body is the worker's
    own ``ErrorIn`` report."""
    delay = parse_retry_after(answer.retry_after)
    text, traceback = fallback, ""
    if answer.body and "json" in answer.content_type:
        try:
            # The worker's answer, read as an answer: fields a newer SDK adds are ignored.
            reported = ErrorIn.model_validate_json(answer.body, extra="ignore")
        except ValidationError:
            reported = None
        if reported is not None:
            text, traceback, kind = reported.error, reported.traceback or "", None
            if reported.retry_delay is not None:
                delay = reported.retry_delay
            if not reported.retryable and outcome is AttemptOutcome.ERROR:
                outcome = AttemptOutcome.FAILED
    elif answer.body:
        text = f"{fallback}: {answer.body[:MAX_ERROR_TEXT].decode('utf-8', 'replace')}"
    task_failure = answer.task_failure and outcome is not AttemptOutcome.BUSY
    if task_failure:
        kind = None
    return Verdict(
        outcome, answer.status, text, traceback, delay, failure=kind, task_failure=task_failure
    )


# A batch result with a 2xx status and no result, as every task returning None is answered:
# one shared (frozen) answer per status, and the verdict of a 200 one, made once.
_NO_RESULT = {status: Answer(status, b"null", "application/json") for status in range(200, 300)}
_SUCCEEDED = Verdict(AttemptOutcome.SUCCEEDED, 200, "null")
_PLAIN_FIELDS = frozenset(
    {"id", "status", "result", "warning", "error", "retry_after", "task_failure"}
)
_NOT_A_BATCH_ANSWER = Answer(None, failure="the answer to a batch push is not a BatchAnswer")
_MISSING = Answer(None, failure="the task is missing from the batch answer")


def _plain_results(body: bytes) -> tuple[dict[str, Answer] | None, bool]:
    """The answers of a ``BatchAnswer`` whose results are all 2xx statuses with no result (an
    ``id``, a ``status``; ``result``, ``warning``, ``error`` and ``retry_after`` null or left
    out, ``task_failure`` false or left out; nothing else), by task id, read with orjson alone:
    what pydantic would read of it, at a fraction of the cost. ``None`` when it is anything
    else, which :class:`BatchAnswer` then reads; with whether orjson read the body (its numbers
    are then all finite: orjson refuses NaN, Infinity and overflowing numbers)."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None, False
    results = data.get("results") if type(data) is dict else None
    if type(results) is not list:
        return None, True
    answers: dict[str, Answer] = {}
    for r in results:
        if type(r) is not dict or not _PLAIN_FIELDS.issuperset(r):
            return None, True
        task_id, status = r.get("id"), r.get("status")
        if (
            type(task_id) is not str
            or type(status) is not int
            or r.get("result") is not None
            or r.get("warning") is not None
            or r.get("error") is not None
            or r.get("retry_after") is not None
            or r.get("task_failure", False) is not False
        ):
            return None, True
        answer = _NO_RESULT.get(status)
        if answer is None:
            return None, True
        answers[task_id] = answer
    return answers, True


def batch_answers(answer: Answer, task_ids: Sequence[str]) -> list[Answer]:
    """Split the answer to a batch push into what each task would have got alone.

    A ``200`` carries a ``BatchAnswer``; each of its results becomes that task's answer. Any
    other answer (an error status, a timeout) is every task's answer. A task missing from the
    results, or a 200 that is not a BatchAnswer, counts as no answer: retried.
    """
    if answer.status != 200:
        return [answer] * len(task_ids)
    plain, finite = _plain_results(answer.body)
    if plain is not None:
        return [plain.get(task_id, _MISSING) for task_id in task_ids]
    try:
        parsed = BatchAnswer.model_validate_json(
            answer.body, context=FINITE_JSON if finite else None
        )
    except ValidationError:
        return [_NOT_A_BATCH_ANSWER] * len(task_ids)
    results = {r.id: r for r in parsed.results}
    answers = []
    for task_id in task_ids:
        r = results.get(task_id)
        if r is None:
            answers.append(_MISSING)
            continue
        if 200 <= r.status < 300:
            body = dump_json(r.result).encode()
        else:
            body = b"" if r.error is None else r.error.model_dump_json().encode()
        retry_after = None if r.retry_after is None else repr(r.retry_after)
        answers.append(
            Answer(
                r.status,
                body,
                "application/json",
                retry_after,
                warning=r.warning,
                task_failure=r.task_failure,
            )
        )
    return answers


def judge(answer: Answer) -> Verdict:
    status = answer.status
    if status is None:
        return Verdict(
            AttemptOutcome.ERROR, None, answer.failure or "no answer", failure=answer.kind
        )
    if status == 202:
        return Verdict(None, status)
    if answer is _NO_RESULT[200]:
        return _SUCCEEDED
    if 200 <= status < 300:
        return Verdict(
            AttemptOutcome.SUCCEEDED, status, _result_json(answer), warning=answer.warning or ""
        )
    if status in (429, 503):
        kind = FailureKind.SERVER_ERROR if status == 503 else None
        return _error(answer, AttemptOutcome.BUSY, f"worker busy ({status})", kind)
    if status == 410:
        return Verdict(AttemptOutcome.GONE, status, "endpoint answered 410 Gone; disabled")
    if status == 408 or status >= 500:
        kind = FailureKind.TIMEOUT if status == 408 else FailureKind.SERVER_ERROR
        return _error(answer, AttemptOutcome.ERROR, f"worker answered {status}", kind)
    if 300 <= status < 400:
        return Verdict(
            AttemptOutcome.ERROR, status, f"worker answered {status}; redirects are not followed"
        )
    return _error(answer, AttemptOutcome.FAILED, f"worker refused the task ({status})")
