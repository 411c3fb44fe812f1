"""Per-key concurrency end to end (issue 22): a real gateway process pushing to a real SDK
worker, which logs when each push arrives. One key's backlog must not starve the others."""

from __future__ import annotations

import os
import signal
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


def test_counts_stay_exact_when_a_gateway_is_killed_mid_flight(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The gateway dies (SIGKILL) with tasks of every key running; another one takes over and
    the recoverer expires their leases. Every task still ends once, no key ever went past its
    limit, and once all ended no count or held task is left."""
    s = setup(cluster, tmp_path, key_concurrency={"limit": LIMIT}, lease_timeout=2.0)
    specs = [
        TaskCreate(name=LONG_INLINE, payload={"args": [0.3]}, concurrency_key=f"k{k}")
        for k in range(3)
        for _ in range(8)
    ]
    created = s.client.enqueue_batch("e2e", specs)
    until(lambda: len(pushes(s.log)) >= 3 * LIMIT, what="a push of every key")
    os.kill(cluster.procs[0].pid, signal.SIGKILL)
    client = cluster.client(cluster.gateway())
    k = QueueKeys.of("e2e")
    seen_counts: list[int] = []
    with redis.Redis.from_url(cluster.redis_url, decode_responses=True) as r:

        def all_ended() -> bool:
            seen_counts.extend(int(v) for v in r.hvals(k.key_counts))
            return r.zcard(k.succeeded) == len(specs)

        # Deadline: the lease (2 s) of the attempts the dead gateway pushed, then the tasks' own
        # work (8 per key, 2 at a time, 0.3 s each), with room for a loaded machine.
        until(all_ended, timeout=2.0 + 8 / LIMIT * 0.3 + 30, what="every task to succeed")
        assert r.hgetall(k.key_counts) == {}
        assert r.zcard(k.ready) == 0
    assert max(seen_counts) <= LIMIT
    assert {client.get_task(t.id).state.value for t in created} == {"succeeded"}
