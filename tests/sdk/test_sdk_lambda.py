"""The worker as an AWS Lambda function (``sdk.lambda_handler``, ``examples/lambda``): the
handler invoked with the events Lambda hands it — function URL (payload v2), API Gateway REST
(v1) and HTTP API (v2), bodies as text and base64 — checking that the signature is verified on
the exact bytes the gateway signed and that the inline answer arrives whole."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import importlib.util
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from sdk import AsyncContext, Warn, Worker, task
from sdk.lambda_handler import LambdaHandler, lambda_handler
from tests.sdk.fakes import OTHER_SECRET, SECRET, FakeGateway, push_body, signed_headers

ROOT = Path(__file__).parents[2]
Event = dict[str, Any]


class Context:
    """The parts of Lambda's context object Mangum reads."""

    function_name = "jobgate-worker"
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:jobgate-worker"
    memory_limit_in_mb = 512
    aws_request_id = "8f5e0a4c-6a54-4d3f-9d0e-3f1c2b7a9e01"
    log_group_name = "/aws/lambda/jobgate-worker"
    log_stream_name = "2030/01/01/[$LATEST]0123456789abcdef"
    identity = None
    client_context = None

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def _body(content: bytes, b64: bool) -> tuple[str, bool]:
    return (base64.b64encode(content).decode(), True) if b64 else (content.decode(), False)


def function_url_event(content: bytes, headers: dict[str, str], b64: bool) -> Event:
    """A Lambda function URL invocation (payload format 2.0)."""
    body, encoded = _body(content, b64)
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": "/",
        "rawQueryString": "",
        "headers": {
            **headers,
            "host": "abcdefghij.lambda-url.eu-west-1.on.aws",
            "x-forwarded-proto": "https",
            "x-forwarded-port": "443",
            "x-forwarded-for": "203.0.113.7",
            "x-amzn-trace-id": "Root=1-5e6722a7-cc56xmpl46db7ae02d4da47e",
            "content-length": str(len(content)),
        },
        "requestContext": {
            "accountId": "anonymous",
            "apiId": "abcdefghij",
            "domainName": "abcdefghij.lambda-url.eu-west-1.on.aws",
            "domainPrefix": "abcdefghij",
            "http": {
                "method": "POST",
                "path": "/",
                "protocol": "HTTP/1.1",
                "sourceIp": "203.0.113.7",
                "userAgent": "Python/3.11 aiohttp/3.12",
            },
            "requestId": "c4b8f0a2-6d1e-4f7a-9b3c-2e5d8a1f7c60",
            "routeKey": "$default",
            "stage": "$default",
            "time": "01/Jan/2030:00:00:00 +0000",
            "timeEpoch": 1893456000000,
        },
        "body": body,
        "isBase64Encoded": encoded,
    }


def http_api_event(content: bytes, headers: dict[str, str], b64: bool) -> Event:
    """An API Gateway HTTP API invocation (payload format 2.0), route ``POST /jobs``."""
    event = function_url_event(content, headers, b64)
    domain = "a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com"
    event.update(routeKey="POST /jobs", rawPath="/jobs")
    event["headers"]["host"] = domain
    context = event["requestContext"]
    context.update(
        accountId="123456789012",
        apiId="a1b2c3d4e5",
        domainName=domain,
        domainPrefix="a1b2c3d4e5",
        routeKey="POST /jobs",
    )
    context["http"]["path"] = "/jobs"
    return event


def rest_api_event(content: bytes, headers: dict[str, str], b64: bool) -> Event:
    """An API Gateway REST API proxy invocation (payload format 1.0), stage ``prod``. REST keeps
    the sender's header case, so these are capitalised."""
    body, encoded = _body(content, b64)
    sent = {
        **{"-".join(w.capitalize() for w in k.split("-")): v for k, v in headers.items()},
        "Host": "a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com",
        "X-Forwarded-Proto": "https",
        "X-Forwarded-Port": "443",
        "X-Forwarded-For": "203.0.113.7",
    }
    return {
        "resource": "/{proxy+}",
        "path": "/jobs",
        "httpMethod": "POST",
        "headers": sent,
        "multiValueHeaders": {k: [v] for k, v in sent.items()},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": {"proxy": "jobs"},
        "stageVariables": None,
        "requestContext": {
            "resourceId": "abc123",
            "resourcePath": "/{proxy+}",
            "httpMethod": "POST",
            "extendedRequestId": "c6af9ac6-7b61-11e6-9a41-93e8deadbeef",
            "requestTime": "01/Jan/2030:00:00:00 +0000",
            "path": "/prod/jobs",
            "accountId": "123456789012",
            "protocol": "HTTP/1.1",
            "stage": "prod",
            "domainPrefix": "a1b2c3d4e5",
            "requestTimeEpoch": 1893456000000,
            "requestId": "c6af9ac6-7b61-11e6-9a41-93e8deadbeef",
            "identity": {"sourceIp": "203.0.113.7", "userAgent": "Python/3.11 aiohttp/3.12"},
            "domainName": "a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com",
            "apiId": "a1b2c3d4e5",
        },
        "body": body,
        "isBase64Encoded": encoded,
    }


SHAPES: dict[str, Callable[[bytes, dict[str, str], bool], Event]] = {
    "function-url": function_url_event,
    "http-api-v2": http_api_event,
    "rest-api-v1": rest_api_event,
}
shapes = pytest.mark.parametrize(
    ("shape", "b64"),
    [(name, b64) for name in SHAPES for b64 in (False, True)],
    ids=[f"{name}-{'base64' if b64 else 'text'}" for name in SHAPES for b64 in (False, True)],
)


def load_example(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``examples/lambda/handler.py``, imported as Lambda would, with its secret set."""
    monkeypatch.setenv("JOBGATE_WORKER_SECRET", f"{OTHER_SECRET},{SECRET}")  # rotating
    path = ROOT / "examples" / "lambda" / "handler.py"
    spec = importlib.util.spec_from_file_location("lambda_example_handler", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def example(monkeypatch: pytest.MonkeyPatch) -> Iterator[LambdaHandler]:
    handler = load_example(monkeypatch).handler
    assert isinstance(handler, LambdaHandler)
    yield handler
    handler.close()


def signed_push(name: str, payload: Any, **json_options: Any) -> tuple[bytes, dict[str, str]]:
    """A push as the gateway sends it: compact JSON, UTF-8 (``ensure_ascii=False``)."""
    body = push_body(name, payload)
    options = {"ensure_ascii": False, "separators": (",", ":"), **json_options}
    content = json.dumps(body, **options).encode()
    return content, signed_headers(body["id"], content, SECRET)


@shapes
def test_a_push_is_answered_inline(example: LambdaHandler, shape: str, b64: bool) -> None:
    content, headers = signed_push("checksum", {"args": ["héllo wörld ☕"]})
    answer = example(SHAPES[shape](content, headers, b64), Context())
    assert answer["statusCode"] == 200, answer
    assert answer["headers"]["content-type"] == "application/json"
    assert answer["isBase64Encoded"] is False
    assert json.loads(answer["body"]) == hashlib.sha256("héllo wörld ☕".encode()).hexdigest()


@shapes
def test_the_signature_covers_the_exact_bytes(
    example: LambdaHandler, shape: str, b64: bool
) -> None:
    content, headers = signed_push("checksum", {"args": ["café"]})
    # The same JSON re-encoded: non-ASCII escaped, spaces after separators. Other bytes.
    for reencoded in (
        json.dumps(json.loads(content), separators=(",", ":")).encode(),
        json.dumps(json.loads(content), ensure_ascii=False).encode(),
    ):
        assert reencoded != content
        answer = example(SHAPES[shape](reencoded, headers, b64), Context())
        assert answer["statusCode"] == 401, answer
        # A problem document comes back as text, not base64 (REST APIs would pass base64 on).
        assert answer["headers"]["content-type"] == "application/problem+json"
        assert answer["isBase64Encoded"] is False
        assert json.loads(answer["body"])["title"] == "Invalid signature"
    # The original bytes pass, so it was the re-encoding that failed.
    assert example(SHAPES[shape](content, headers, b64), Context())["statusCode"] == 200


def test_refusals_and_failures_keep_their_meaning(example: LambdaHandler) -> None:
    content, headers = signed_push("nope", None)
    answer = example(rest_api_event(content, headers, False), Context())
    assert (answer["statusCode"], json.loads(answer["body"])["title"]) == (404, "Unknown task")

    content, headers = signed_push("thumbnail_size", {"args": [0, 10]})
    answer = example(function_url_event(content, headers, True), Context())
    assert answer["statusCode"] == 422  # Fail: failed, not retried
    assert json.loads(answer["body"]) == {
        "error": "width and height must be positive",
        "retryable": False,
    }

    content, headers = signed_push("thumbnail_size", {"args": [1024, 512]})
    answer = example(http_api_event(content, headers, False), Context())
    assert (answer["statusCode"], json.loads(answer["body"])) == (
        200,
        {"width": 256, "height": 128},
    )


@task(queue="lambda", name="warned")
def warned() -> Warn | int:
    return Warn("2 rows skipped ✂", result=7)


@task(queue="lambda", name="outlasts_the_window")
async def outlasts_the_window() -> str:
    await asyncio.sleep(0.3)
    return "late"


@task(queue="lambda", name="two_naps")
async def two_naps(ctx: AsyncContext) -> str:
    for n in range(2):
        await ctx.step(f"nap-{n}", asyncio.sleep, 0.2)
    return "rested"


class Remaining(Context):
    """A context whose invocation has ``ms`` milliseconds left."""

    def __init__(self, ms: int) -> None:
        self.ms = ms

    def get_remaining_time_in_millis(self) -> int:
        return self.ms


@pytest.fixture
def make_handler(make_worker: Callable[..., Worker]) -> Iterator[Callable[..., LambdaHandler]]:
    made: list[LambdaHandler] = []

    def make(follow_time_limit: bool = True, **options: Any) -> LambdaHandler:
        worker = make_worker([warned, outlasts_the_window, two_naps], **options)
        made.append(lambda_handler(worker, follow_time_limit=follow_time_limit))
        return made[-1]

    yield make
    for handler in made:
        handler.close()


def test_a_warning_travels_in_its_header(make_handler: Callable[..., LambdaHandler]) -> None:
    handler = make_handler()
    content, headers = signed_push("warned", None)
    answer = handler(function_url_event(content, headers, False), Context())
    assert (answer["statusCode"], answer["body"]) == (200, "7")
    assert answer["headers"]["jobgate-warning"] == "2 rows skipped %E2%9C%82"


def test_a_task_past_the_inline_window_ends_within_the_invocation(
    make_handler: Callable[..., LambdaHandler], gateway: FakeGateway
) -> None:
    """Answered 202, it still runs to its result callback before the invocation returns: the
    lifespan's end (``finish``) waits for it, so Lambda never freezes a task half done."""
    handler = make_handler(inline_window=0.05)
    for _ in range(2):  # a second invocation reopens what the first one closed
        content, headers = signed_push("outlasts_the_window", None)
        answer = handler(function_url_event(content, headers, False), Context())
        assert answer["statusCode"] == 202
        assert gateway.kinds()[-1] == "result"
        assert gateway.calls[-1].body == {"result": "late"}
    assert handler.worker.running == 0


def test_a_step_that_would_outlast_the_invocation_is_handed_over(
    make_handler: Callable[..., LambdaHandler], gateway: FakeGateway
) -> None:
    """0.45 s left: the first nap (0.2 s) runs, the second (0.2 s and the 0.1 s margin) would not
    fit, so the task goes back for a fresh invocation by a sleep with no delay (no attempt
    spent) instead of being cut by Lambda's timeout."""
    handler = make_handler(time_limit_margin=0.1)
    content, headers = signed_push("two_naps", None)
    answer = handler(function_url_event(content, headers, False), Remaining(450))
    assert answer["statusCode"] == 202
    assert gateway.kinds() == ["step", "sleep"]
    assert gateway.calls[0].body == {"name": "nap-0"}  # a null result is left out
    until = datetime.fromisoformat(gateway.calls[1].body["until"])
    assert until <= datetime.now(UTC)
    assert handler.worker.runner.invocation_ends is None  # set for the invocation only

    for spare, left in ((handler, 30_000), (make_handler(follow_time_limit=False), 450)):
        gateway.calls.clear()  # with time to spare, or the limit not followed: both naps run
        answer = spare(function_url_event(content, headers, False), Remaining(left))
        assert (answer["statusCode"], answer["body"]) == (200, '"rested"')
        assert gateway.kinds() == ["step", "step"]
