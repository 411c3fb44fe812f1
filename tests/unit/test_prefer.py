"""The Prefer header (RFC 7240) as the enqueue routes read it: return=minimal or nothing."""

from __future__ import annotations

import pytest

from gateway.api.prefer import wants_minimal


@pytest.mark.parametrize(
    "header",
    [
        "return=minimal",
        "Return=minimal",
        "return = minimal",
        'return="minimal"',
        "respond-async, return=minimal",
        "return=minimal; foo=bar, wait=10",
        "handling=lenient,return=minimal",
        "return=minimal, return=representation",  # the first counts
    ],
)
def test_return_minimal_is_recognised(header: str) -> None:
    assert wants_minimal(header)


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "return=representation",
        "return=Minimal",  # values compare with case
        "return",
        "minimal",
        "returns=minimal",
        "return=representation, return=minimal",
        "respond-async",
        '"return=minimal"',
        ",,;=",
    ],
)
def test_anything_else_is_ignored(header: str | None) -> None:
    assert not wants_minimal(header)
