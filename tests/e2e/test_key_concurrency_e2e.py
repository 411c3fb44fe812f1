"""Per-key concurrency end to end (issue 22): a real gateway process pushing to a real SDK
worker, which logs when each push arrives. One key's backlog must not starve the others."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis

from gateway.store.keys import QueueKeys
from sdk import TaskCreate

from .conftest import Cluster, pushes
from .test_e2e import LONG_INLINE, setup, until

pytestmark = pytest.mark.e2e

LIMIT = 2
BIG = 10_000  # the figure
SMALL_KEYS = 40
PER_KEY = 10
WORK = 0.2  # seconds each task runs (answered inline)
SLOTS = 64  # the endpoint's concurrency (tests.e2e.test_e2e.setup)


def test_a_backlog_of_one_key_does_not_starve_the_small_keys(
    cluster: Cluster, tmp_path: Path
) -> None:
    s = setup(cluster, tmp_path, key_concurrency={"limit": LIMIT})
    big = [
        TaskCreate(name=LONG_INLINE, payload={"args": [WORK]}, concurrency_key="big")
        for _ in range(BIG)
    ]
    small = [
        TaskCreate(name=LONG_INLINE, payload={"args": [WORK]}, concurrency_key=f"k{k}")
        for k in range(SMALL_KEYS)
        for _ in range(PER_KEY)
    ]
    # The backlog goes in first, the small keys behind all of it.
    for start in range(0, BIG, 1000):
        s.client.enqueue_batch("e2e", big[start : start + 1000])
    enqueued = time.time()
    small_ids = {t.id for t in s.client.enqueue_batch("e2e", small)}
    seen_counts: list[int] = []
    with redis.Redis.from_url(cluster.redis_url, decode_responses=True) as r:

        def small_all_pushed() -> bool:
            seen_counts.extend(int(v) for v in r.hvals(QueueKeys.of("e2e").key_counts))
            return sum(p["id"] in small_ids for p in pushes(s.log)) >= len(small)

        # The least time the small keys' own work needs: each key's tasks LIMIT at a time, and
        # all of them on the slots the backlog's key leaves free (1.3 s). The deadline is a few
        # times that (2 s measured on a quiet machine, 4.9 s beside two CPU burners): behind
        # the backlog (FIFO, no per-key limit) they would start only after BIG * WORK / SLOTS =
        # 31 s.
        own = max(PER_KEY / LIMIT, SMALL_KEYS * PER_KEY / (SLOTS - LIMIT)) * WORK
        deadline = 6 * own + 5
        until(small_all_pushed, timeout=deadline, what="every small key's pushes")
    log = pushes(s.log)
    last_small = max(p["t"] for p in log if p["id"] in small_ids)
    assert last_small - enqueued <= deadline
    big_started = sum(p["id"] not in small_ids for p in log if p["t"] <= last_small)
    # The backlog's key ran at most LIMIT at a time meanwhile; no key ever went past its limit.
    first = min(p["t"] for p in log)  # the backlog started while it was being enqueued
    assert big_started <= LIMIT * ((last_small - first) / WORK + 1), big_started
    assert max(seen_counts) <= LIMIT
    assert all(p["attempt"] == "1" for p in log)  # no push was refused or retried
