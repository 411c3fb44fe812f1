"""bench/latency_hops.py times each hop of an enqueue by stamping a copy of the tree at exact
lines of source: each anchor must be found once in today's code, or the tool stops (it had
gone stale twice, unnoticed, as the code moved)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.latency_hops import PATCHES

ROOT = Path(__file__).parents[2]


@pytest.mark.parametrize(("path", "anchor"), [(path, anchor) for path, anchor, _ in PATCHES])
def test_each_anchor_of_the_hop_stamps_is_found_once(path: str, anchor: str) -> None:
    assert (ROOT / path).read_text().count(anchor) == 1
