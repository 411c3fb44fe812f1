"""Parsing ``redis+sentinel://`` URLs, and refusing malformed ones at start."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from gateway.settings import Settings
from gateway.store.sentinel import SentinelUrl


@pytest.mark.parametrize(
    ("url", "parsed"),
    [
        (
            "redis+sentinel://s1:26380,s2,[::1]:26381/jobgate/2",
            SentinelUrl((("s1", 26380), ("s2", 26379), ("::1", 26381)), "jobgate", 2),
        ),
        (
            "redis+sentinel://:p%40ss@s1/jobgate",
            SentinelUrl((("s1", 26379),), "jobgate", 0, None, "p@ss"),
        ),
        (
            "redis+sentinel://app:pw@s1:1/jobgate/",
            SentinelUrl((("s1", 1),), "jobgate", 0, "app", "pw"),
        ),
    ],
)
def test_parsed(url: str, parsed: SentinelUrl) -> None:
    assert SentinelUrl.parse(url) == parsed


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis+sentinel://s1:26379", "name the Sentinel service"),
        ("redis+sentinel:///jobgate", "at least one host"),
        ("redis+sentinel://s1,,s2/jobgate", "at least one host"),
        ("redis+sentinel://s1:port/jobgate", "host[:port]"),
        ("redis+sentinel://s1/jobgate/zero", "must be a number"),
    ],
)
def test_malformed_is_refused_at_start(url: str, says: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(says)):
        Settings(redis_url=url)
