"""Fixtures of the SDK tests (the doubles themselves are in ``fakes``)."""

from __future__ import annotations

from typing import Any

import pytest

from sdk import Worker
from tests.sdk.fakes import SECRET, FakeGateway, MakeWorker, Serve, serve_worker


@pytest.fixture
def gateway() -> FakeGateway:
    """The fake gateway that receives the callbacks of workers made by ``make_worker``."""
    return FakeGateway()


@pytest.fixture
def serve() -> Serve:
    """``async with serve(worker) as push``: inside the worker's lifespan, with a pusher."""
    return serve_worker


@pytest.fixture
def make_worker(gateway: FakeGateway) -> MakeWorker:
    """``make_worker(tasks, **options)``: a worker whose callbacks reach the fake gateway."""

    def make(tasks: list[Any], **options: Any) -> Worker:
        options.setdefault("final_retry_delays", (0.0, 0.0))
        return Worker(tasks=tasks, secret=SECRET, transport=gateway.transport(), **options)

    return make
