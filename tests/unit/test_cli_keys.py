"""``jobgate keys end-sessions`` (and the SDK call under it) against a mocked gateway."""

from __future__ import annotations

import json

import httpx
import pytest
import respx

from sdk.client import AsyncClient
from tests.unit.test_cli_ops import URL, gw, run

__all__ = ["gw"]  # the fixture, shared with test_cli_ops


def test_end_sessions_of_a_key(gw: respx.MockRouter, capsys: pytest.CaptureFixture[str]) -> None:
    route = gw.delete("/v1/keys/ops%20team/sessions").respond(
        200, json={"key_name": "ops team", "ended": 2}
    )
    code, out, _ = run(capsys, "keys", "end-sessions", "ops team")
    assert (code, out) == (0, "ended 2 admin UI sessions of key ops team\n")
    assert route.called
    code, out, _ = run(capsys, "keys", "end-sessions", "ops team", "--json")
    assert code == 0
    assert json.loads(out) == {"key_name": "ops team", "ended": 2}


def test_end_sessions_of_an_unknown_key_fails(
    gw: respx.MockRouter, capsys: pytest.CaptureFixture[str]
) -> None:
    problem = {"title": "API key not found", "status": 404, "detail": "no configured API key"}
    gw.delete("/v1/keys/nobody/sessions").respond(
        404, json=problem, headers={"content-type": "application/problem+json"}
    )
    code, out, err = run(capsys, "keys", "end-sessions", "nobody")
    assert (code, out) == (1, "")
    assert "404 API key not found" in err


async def test_the_async_client_ends_sessions_too() -> None:
    with respx.mock(base_url=URL) as router:
        router.delete("/v1/keys/viewer/sessions").respond(
            200, json={"key_name": "viewer", "ended": 0}
        )
        async with AsyncClient(URL, "k", transport=httpx.AsyncHTTPTransport()) as client:
            ended = await client.end_sessions("viewer")
    assert (ended.key_name, ended.ended) == ("viewer", 0)
