"""Settings that are derived, not just read."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from gateway.settings import ApiKey, Settings


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"host": "127.0.0.1", "port": 8787}, "http://127.0.0.1:8787"),
        ({"host": "0.0.0.0", "port": 80}, "http://127.0.0.1:80"),
        ({"host": "::", "port": 80}, "http://[::1]:80"),
        (
            {"host": "gw.internal", "certfile": Path("c.pem"), "keyfile": Path("k.pem")},
            "https://gw.internal:8787",
        ),
        ({"public_url": "https://jobs.example.com/"}, "https://jobs.example.com"),
    ],
)
def test_callback_base(fields: dict[str, object], expected: str) -> None:
    assert Settings(**fields).callback_base == expected  # type: ignore[arg-type]


def test_api_keys_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBGATE_API_KEYS", '[{"key": "0123456789abcdef", "scopes": ["read"]}]')
    (key,) = Settings().api_keys
    assert key.scopes == ["read"]


@pytest.mark.parametrize("scopes", [["admin"], ["read"], ["enqueue:mail-*"], ["read", "enqueue:a"]])
def test_known_scopes_are_accepted(scopes: list[str]) -> None:
    assert ApiKey(key="0123456789abcdef", scopes=scopes).scopes == scopes


@pytest.mark.parametrize("scopes", [["write"], ["admin", "Read"], ["enqueue:"], ["enqueue"]])
def test_unknown_scopes_are_refused_naming_the_key_and_the_valid_scopes(
    scopes: list[str],
) -> None:
    with pytest.raises(ValidationError) as refused:
        ApiKey(key="0123456789abcdef", scopes=scopes, name="ci")
    message = str(refused.value)
    assert "key 'ci' has unknown scope" in message
    assert "valid scopes: admin, read, metrics, enqueue:<queue pattern>" in message
