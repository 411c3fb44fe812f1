"""Redis SIGKILLed under a gateway firing a job every second, and started again ~3 s later
(AOF ``always``: the job and its runs survive): every fire time gets exactly one run, the
missed ones caught up within a second or so of Redis answering, and ``/readyz`` does not
answer 200 before the firing loop has taken a turn that worked.

Real processes: one gateway, one ``redis-server`` of the test's own. The outage's length is the
scenario, not a wait for something; everything else is polled against a deadline.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.core.backoff import LOOP_RETRY_CAP
from gateway.serving.redis_server import ManagedRedis
from tests.support import free_port

from .conftest import Cluster
from .test_jobs_e2e import all_runs, until

pytestmark = pytest.mark.e2e

JOBS_INTERVAL = 0.25  # the gateway's default
OUTAGE = 3.0  # seconds Redis is down
# The guarantee: a failed turn is tried again within LOOP_RETRY_CAP (the pub/sub reconnect wakes
# it too), then the step takes up to an interval. The rest is room for a loaded 2-core machine
# (the step makes a handful of runs, each a few round trips, in a process that shares the CPU).
RESUME_WITHIN = LOOP_RETRY_CAP + JOBS_INTERVAL + 1.5


@dataclass(frozen=True)
class Probe:
    sent: float  # time.time() before the request
    answered: float  # time.time() after the answer
    status: int
    loops: str


class ReadyzWatch:
    """Probes ``/readyz`` every 20 ms in a thread, recording every answer."""

    def __init__(self, gateway: str) -> None:
        self.probes: list[Probe] = []
        self._gateway = gateway
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ReadyzWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        with httpx.Client(timeout=5) as http:
            while not self._stop.is_set():
                sent = time.time()
                try:
                    r = http.get(f"{self._gateway}/readyz")
                except httpx.TransportError:
                    continue
                loops = r.json()["checks"].get("loops", "")
                self.probes.append(Probe(sent, time.time(), r.status_code, loops))
                self._stop.wait(0.02)


def task_enqueued(api: httpx.Client, task_id: str) -> bool:
    """Whether the task exists (asked again while the API answers 503)."""
    answer: httpx.Response = until(
        lambda: (r := api.get(f"/v1/tasks/{task_id}")).status_code != 503 and r,
        timeout=30,
        what=f"an answer about task {task_id}",
    )
    return answer.status_code == 200


@pytest.mark.timeout(180)
def test_a_redis_restart_loses_no_fire_time_and_readyz_waits_for_the_firing_loop(
    tmp_path: Path,
) -> None:
    redis = ManagedRedis(tmp_path / "redis", port=free_port(), appendfsync="always")
    redis.start()
    cluster = Cluster(redis.url, tmp_path)
    try:
        gateway = cluster.gateway(JOBGATE_JOBS_INTERVAL=str(JOBS_INTERVAL))
        with cluster.api(0) as api:
            assert api.put("/v1/queues/ticks", json={}).status_code == 201
            start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
            job = api.post(
                "/v1/jobs",
                json={
                    "title": "every second",
                    "task": {"queue": "ticks", "name": "tick"},
                    "schedule": {"kind": "interval", "seconds": 1, "start_at": start.isoformat()},
                    "overlap": "allow",  # no worker: runs pile up, every firing must still run
                },
            ).json()

            def read_runs() -> list[dict[str, Any]] | None:
                """The job's runs; None while the API answers 503 (Redis is down, or just
                back: a pooled connection it closed fails its first command)."""
                try:
                    return all_runs(api, job["id"])
                except KeyError:  # a 503 problem document, not a page
                    return None

            def fire_times() -> Counter[datetime]:
                return Counter(datetime.fromisoformat(r["fire_time"]) for r in read_runs() or [])

            until(lambda: len(fire_times()) >= 2, timeout=60, what="two runs before the kill")
            with ReadyzWatch(gateway) as watch:
                proc = redis.process
                assert proc is not None
                proc.kill()  # SIGKILL: no shutdown
                proc.wait()
                killed = time.time()
                time.sleep(OUTAGE)  # the outage itself
                back = time.time()  # Redis answers from about now (start returns on PING)
                redis.start()
                answering = time.time()
                # Caught up: a run up to two seconds after Redis is back.
                last = datetime.fromtimestamp(int(answering) + 2, UTC)
                # (A deadline past a whole rescan_interval, so that a loop that sleeps through
                # it still gets to the assertions below, which say how late it was.)
                until(
                    lambda: max(fire_times(), default=start) >= last,
                    timeout=90,
                    what="the runs after the restart",
                )
                until(
                    lambda: any(p.sent > answering and p.status == 200 for p in watch.probes),
                    timeout=30,
                    what="/readyz 200 after the restart",
                )
            runs: list[dict[str, Any]] = until(read_runs, timeout=30, what="the runs")
            # Every run's task is enqueued by now, a run claimed just before the kill and not
            # enqueued included (resumed once Redis is back, not resume_ms = 30 s later).
            missing = [r["id"] for r in runs if not task_enqueued(api, r["task_id"])]
    finally:
        cluster.stop()
        redis.stop()

    counted = Counter(datetime.fromisoformat(r["fire_time"]) for r in runs)
    created = {
        datetime.fromisoformat(r["fire_time"]): datetime.fromisoformat(r["created_at"])
        for r in runs
    }
    expected = [start + timedelta(seconds=k) for k in range(int((last - start).total_seconds()))]
    missed = [t for t in expected if killed < t.timestamp() < back]
    assert len(missed) >= 2, (killed, back, missed)
    # When the last fire time missed got its run (never: it was lost).
    caught_up = max(created[t].timestamp() if t in created else float("inf") for t in missed)

    # (b) No 200 from /readyz after the restart before the firing loop had worked again: by the
    # first 200 answered after Redis was back, every fire time missed had its run.
    first_ready = min(p.answered for p in watch.probes if p.sent > answering and p.status == 200)
    assert caught_up <= first_ready, ("caught up after ready by", caught_up - first_ready)
    # While Redis was down, readiness said so (once the check cached before the kill had
    # expired, a second), and named the stalled loop then or before the firing loop caught up.
    down = [p for p in watch.probes if killed + 1.5 < p.sent and p.answered < back]
    assert down
    assert all(p.status == 503 for p in down)
    assert any("job firing" in p.loops for p in watch.probes if p.sent > killed), {
        p.loops for p in watch.probes
    }

    # (a) Every fire time from the first to the last has exactly one run: none lost, none twice;
    # those missed while Redis was down were made soon after it answered again, each with its
    # task.
    assert missing == []
    assert [t for t in expected if counted[t] != 1] == [], counted
    assert max(counted.values()) == 1
    assert caught_up - back < RESUME_WITHIN, (caught_up - back, RESUME_WITHIN)
