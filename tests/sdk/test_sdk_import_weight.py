"""What a program loads by using the SDK (docs/architecture.md, "Two distributions"): nothing of
the gateway's dependencies ever; the HTTP clients only once a client is built; the worker's
machinery only once a Worker is built, no web framework, and its HTTP client from its lifespan's
start (in a thread); OpenTelemetry only when the application has imported it.

Each case runs in a fresh interpreter and reads ``sys.modules`` (no timing here:
bench/cold_start.py measures the time).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Never loaded by the SDK, whatever it does.
GATEWAYS = ["gateway", "redis", "hypercorn", "aioquic", "apscheduler", "jinja2", "uvicorn"]
# Loaded by the application's own use only.
TELEMETRY = ["opentelemetry"]
HTTP = ["httpx", "aiohttp"]
FRAMEWORK = ["starlette", "anyio"]  # anyio: Starlette's, and httpcore's once a client is built

PUSH = """
import asyncio, json
from datetime import UTC, datetime, timedelta
from standardwebhooks import Webhook

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
now = datetime.now(UTC)
body = json.dumps({
    "id": "T1", "queue": "q", "name": "double", "payload": {"args": [21], "kwargs": {}},
    "attempt": 1, "checkpoint": None, "deadline": (now + timedelta(hours=1)).isoformat(),
    "lease_expires_at": (now + timedelta(minutes=1)).isoformat(),
})
headers = {
    "webhook-id": "T1", "webhook-timestamp": str(int(now.timestamp())),
    "webhook-signature": Webhook(SECRET).sign("T1", now, body),
    "jobgate-lease": "L1", "jobgate-callback": "http://127.0.0.1:9/v1/tasks/T1",
}

@task("q", name="double")
def double(x: int) -> int:
    return 2 * x

app = Worker(tasks=[double], secret=SECRET)
sent = []

async def answer():
    async with app.lifespan():
        async def receive():
            return {"type": "http.request", "body": body.encode(), "more_body": False}
        async def send(message):
            sent.append(message)
        scope = {"type": "http", "method": "POST", "path": "/",
                 "headers": [(k.encode(), v.encode()) for k, v in headers.items()]}
        await app(scope, receive, send)

asyncio.run(answer())
assert (sent[0]["status"], sent[1]["body"]) == (200, b"42"), sent
"""


def modules(code: str) -> set[str]:
    """Every module loaded by ``code`` in a fresh interpreter (read before this probe imports
    ``json`` to print them)."""
    script = (
        textwrap.dedent(code)
        + "\nimport sys\nLOADED = sorted(sys.modules)\nimport json\nprint(json.dumps(LOADED))"
    )
    # From the repository root: `python -c` puts the working directory first on the path.
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def loaded(code: str) -> set[str]:
    """The top-level packages loaded by ``code`` in a fresh interpreter."""
    return {name.split(".")[0] for name in modules(code)}


@pytest.mark.parametrize(
    ("code", "absent"),
    [
        pytest.param(
            "import sdk", GATEWAYS + TELEMETRY + HTTP + FRAMEWORK + ["pydantic"], id="sdk"
        ),
        pytest.param(
            "from sdk import Client, Worker, task, group",
            GATEWAYS + TELEMETRY + HTTP + FRAMEWORK,
            id="names",
        ),
        pytest.param(
            "from sdk import Client, task\nClient('http://127.0.0.1:9', 'key').close()",
            [*GATEWAYS, *TELEMETRY, "starlette", "aiohttp"],
            id="client",
        ),
        pytest.param(
            "from sdk import AsyncClient\nAsyncClient('http://127.0.0.1:9', 'key')",
            [*GATEWAYS, *TELEMETRY, "starlette"],
            id="async-client",
        ),
        pytest.param(
            "from sdk import Worker, task\n"
            "app = Worker(tasks=[], secret='whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')",
            GATEWAYS + TELEMETRY + HTTP + FRAMEWORK,
            id="worker-built",
        ),
        pytest.param(
            # The lifespan's start loads the callback client in a thread (aiohttp, httpx).
            "from sdk import Worker, task\n" + PUSH,
            [*GATEWAYS, *TELEMETRY, "starlette"],
            id="worker-inline-push",
        ),
    ],
)
def test_what_using_the_sdk_loads(code: str, absent: list[str]) -> None:
    assert loaded(code) & set(absent) == set()


def test_the_wire_models_load_with_the_first_name_that_needs_them() -> None:
    assert "pydantic" in loaded("from sdk import TaskCreate")
    assert "httpx" in loaded("from sdk import Client\nClient('http://127.0.0.1:9').close()")


def test_a_worker_records_metrics_once_the_application_imports_opentelemetry() -> None:
    # A meter provider set up by the application before the worker's lifespan starts is used,
    # though the worker was built before OpenTelemetry was imported.
    code = """
    from sdk import Worker, task
    from sdk.telemetry.recorder import NoMetrics

    @task("q", name="noop")
    def noop() -> None: ...

    app = Worker(tasks=[noop], secret="whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
    assert isinstance(app.runner.metrics, NoMetrics)
    import opentelemetry.metrics
    app.runner.open()
    assert type(app.runner.metrics).__name__ == "WorkerMetrics", app.runner.metrics
    """
    assert "opentelemetry" in loaded(code)


# A producer's import (issue 31): `from sdk import Client, task` cost 0.22-0.29 s of CPU, more
# than Celery's import (0.12-0.16 s), for pydantic, the 72 wire models, the request specs and
# asyncio, none of which the import needs: the clients and `@task` load them on first use
# (sdk/lazy.py). The bound is the modules loaded, not seconds (bench/RESULTS.md has the times).
PRODUCER = "from sdk import Client, task"
PRODUCER_SDK = {
    "sdk",
    "sdk.binding",
    "sdk.client",
    "sdk.client_events",
    "sdk.client_jobs",
    "sdk.client_ops",
    "sdk.client_queues",
    "sdk.client_tasks",
    "sdk.errors",
    "sdk.groups",
    "sdk.handles",
    "sdk.lazy",
    "sdk.options",
    "sdk.tasks",
}
# Standard modules a producer's import must not bring back (each costs milliseconds, asyncio
# tens): none of them is needed before a client sends.
HEAVY_STANDARD = {
    "asyncio",
    "concurrent",
    "ssl",
    "socket",
    "http",
    "email",
    "urllib",
    "json",
    "logging",
    "zoneinfo",
    "decimal",
    "subprocess",
}
PRODUCER_MOST_MODULES = 45  # 36 with Python 3.11: the SDK's 14 and 22 standard ones


def test_a_producers_import_loads_the_light_modules_alone() -> None:
    added = modules(PRODUCER) - modules("pass")
    assert {m for m in added if m == "sdk" or m.startswith("sdk.")} == PRODUCER_SDK
    tops = {m.split(".")[0] for m in added} - {"sdk"}
    assert not tops - sys.stdlib_module_names, "only standard modules besides the SDK's own"
    assert not tops & HEAVY_STANDARD
    assert len(added) <= PRODUCER_MOST_MODULES, sorted(added)


def test_a_producer_loads_the_rest_on_first_use() -> None:
    # Decorating a task checks its name and options with the wire models; the client's first
    # request loads the request specs and the coalescer.
    decorated = modules(PRODUCER + "\n@task('q')\ndef f() -> None: ...")
    assert {"pydantic", "sdk.wire.tasks"} <= decorated
    assert "asyncio" not in decorated
    sent = modules(
        PRODUCER
        + "\nclient = Client('http://127.0.0.1:9', 'key')\n"
        + "try:\n    client.get_task('01JCOLDSTART0000000000000A')\nexcept Exception:\n    pass"
    )
    assert {"sdk.api", "sdk.coalescing", "sdk.telemetry.tracing"} <= sent
