"""The admin UI at 1,000 queues (issue 21): what a page load and a live refresh cost.

Starts a managed Redis and one gateway process (``python -m gateway serve``), registers one
queue with a few tasks, measures the tasks page, then registers 999 more (through the API; a
tenth of them get a few queued tasks, a few cancelled ones and a paused flag) and measures:

- the queues page: its size, and the gateway's CPU for a whole page load and for a live
  refresh (the htmx request for the live part), sorted by name, searched, and sorted by
  queued tasks (from the summary every viewer shares; reading that summary again, which a
  page sorted by a state does once it is older than 10 s, is measured apart, in-process);
- the tasks, running and dead-letter pages, and a queue picker's suggestions, at 1 and at
  1,000 queues.

CPU is the gateway process's ``utime + stime`` (``/proc/<pid>/stat``) around each request, and
Redis's ``used_cpu_user + used_cpu_sys`` (``INFO cpu``), over 10 requests made one after
another by one signed-in client, divided by 10 (``--batch``); the median of ``--repeat`` such
samples. ``--gateway-path`` runs the gateway from another tree (e.g. an exported older commit)
to compare: the benchmark's own code stays this one.

Run from the repository root: ``.venv/bin/python -m bench.admin_scale``. Loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import redis
from redis import asyncio as aioredis

from bench.e2e import KEY, ROOT, wait_http
from bench.proc_stat import cpu_seconds
from gateway.serving.redis_server import ManagedRedis, free_port
from gateway.store.overview import OverviewStore
from gateway.store.scripts import Scripts
from sdk.wire import TaskState

QUEUES = 1000


def sign_in(web: httpx.Client) -> None:
    form = web.get("/admin/login")
    token = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert token, "no CSRF field on the sign-in page"
    done = web.post(
        "/admin/login", data={"csrf": token.group(1), "api_key": KEY, "next": "/admin/queues"}
    )
    assert done.status_code == 303, done.text


def redis_cpu(r: redis.Redis) -> float:
    info = r.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


class Meter:
    """Median gateway and Redis CPU (ms) and size (bytes) of one request: the CPU clocks tick
    every 10 ms, so each sample is ``batch`` requests in a row, divided by ``batch``."""

    def __init__(
        self, web: httpx.Client, pid: int, r: redis.Redis, repeat: int, batch: int
    ) -> None:
        self.web, self.pid, self.r, self.repeat, self.batch = web, pid, r, repeat, batch

    def sample(self, path: str, *, live: bool = False) -> tuple[float, float, int]:
        headers = {"hx-request": "true"} if live else {}
        gw, rd = cpu_seconds(self.pid), redis_cpu(self.r)
        for _ in range(self.batch):
            answer = self.web.get(path, headers=headers)
            assert answer.status_code == 200, (path, answer.status_code, answer.text[:300])
        gw_ms = (cpu_seconds(self.pid) - gw) * 1000 / self.batch
        rd_ms = (redis_cpu(self.r) - rd) * 1000 / self.batch
        return gw_ms, rd_ms, len(answer.content)

    def median(self, path: str, *, live: bool = False) -> tuple[float, float, int]:
        samples = [self.sample(path, live=live) for _ in range(self.repeat)]
        return (
            statistics.median(s[0] for s in samples),
            statistics.median(s[1] for s in samples),
            samples[-1][2],
        )


async def summary_cost(url: str, repeat: int) -> float:
    """Gateway CPU (ms, ``time.process_time``, median) of reading every queue's number of
    queued tasks, the summary a page sorted by queued tasks reads again when it is older than
    10 s: the same store calls as the gateway's, made in this process, where the clock is
    precise."""
    client = aioredis.Redis.from_url(url, decode_responses=True)
    try:
        store = OverviewStore(client, Scripts(client))
        samples = []
        for _ in range(repeat):
            start = time.process_time()
            await store.sizes(await store.names(), TaskState.QUEUED)
            samples.append((time.process_time() - start) * 1000)
        return statistics.median(samples)
    finally:
        await client.aclose()


def fill(api: httpx.Client, first: int, last: int) -> None:
    """Queues ``q0000``...: every tenth holds 7 queued tasks and 3 cancelled ones and is
    paused (so it has rows worth showing and throughput in its last minutes)."""
    for i in range(first, last):
        name = f"q{i:04d}"
        assert api.put(f"/v1/queues/{name}", json={"paused": i % 10 == 0}).is_success
        if i % 10:
            continue
        tasks = [{"name": f"job{j % 3}", "owner": f"t{i}"} for j in range(10)]
        made = api.post(f"/v1/queues/{name}/tasks/batch", json={"tasks": tasks}).json()["tasks"]
        for task in made[:3]:
            api.post(f"/v1/tasks/{task['id']}/cancel")


def table(rows: list[tuple[str, tuple[float, float, int]]]) -> None:
    print("| request | gateway CPU (ms) | Redis CPU (ms) | size (KB) |")
    print("| --- | --: | --: | --: |")
    for what, (gw, rd, size) in rows:
        print(f"| {what} | {gw:.1f} | {rd:.1f} | {size / 1024:.1f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="samples per median")
    parser.add_argument("--batch", type=int, default=10, help="requests per sample")
    parser.add_argument("--gateway-path", help="PYTHONPATH of the gateway process")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ManagedRedis(Path(tmp)) as managed:
        port = free_port()
        env = {
            **os.environ,
            "JOBGATE_REDIS_URL": managed.url,
            "JOBGATE_API_KEYS": json.dumps([{"key": KEY, "scopes": ["admin"]}]),
            "JOBGATE_LOG_LEVEL": "warning",
            "JOBGATE_PORT": str(port),
        }
        if args.gateway_path:
            env["PYTHONPATH"] = args.gateway_path
        url = f"http://127.0.0.1:{port}"
        # ``-m`` puts the working directory first on the path: the tree asked for must be it.
        cwd = args.gateway_path or ROOT
        gateway = subprocess.Popen([sys.executable, "-m", "gateway", "serve"], env=env, cwd=cwd)
        try:
            wait_http(url + "/healthz", gateway)
            headers = {"authorization": f"Bearer {KEY}"}
            with (
                httpx.Client(base_url=url, headers=headers, timeout=120) as api,
                httpx.Client(base_url=url, timeout=120) as web,
                redis.Redis.from_url(managed.url) as r,
            ):
                sign_in(web)
                meter = Meter(web, gateway.pid, r, args.repeat, args.batch)
                fill(api, 0, 1)
                others: list[tuple[str, Callable[[], tuple[float, float, int]]]] = [
                    ("tasks page", lambda: meter.median("/admin/tasks")),
                    ("tasks page, one queue", lambda: meter.median("/admin/tasks?queue=q0000")),
                    ("running page", lambda: meter.median("/admin/running")),
                    ("dead letters page", lambda: meter.median("/admin/deadletters")),
                ]
                at_one = [(f"{what}, 1 queue", run()) for what, run in others]
                fill(api, 1, QUEUES)
                at_many = [(f"{what}, {QUEUES:,} queues", run()) for what, run in others]
                queues_rows = [
                    ("queues page, load", meter.median("/admin/queues")),
                    ("queues page, live refresh", meter.median("/admin/queues", live=True)),
                    (
                        "queues page 20 (rows 951-1,000), load",
                        meter.median("/admin/queues?cursor=950"),
                    ),
                    ("queues page, search 'q09', load", meter.median("/admin/queues?q=q09")),
                    (
                        "queues page, search 'q09', refresh",
                        meter.median("/admin/queues?q=q09", live=True),
                    ),
                ]
                sorted_path = "/admin/queues?sort=queued&dir=desc"
                queues_rows += [
                    ("queues page by queued, load", meter.median(sorted_path)),
                    ("queues page by queued, refresh", meter.median(sorted_path, live=True)),
                ]
                # This tree's store code: meaningless beside another tree's gateway.
                summary = (
                    None
                    if args.gateway_path
                    else asyncio.run(summary_cost(managed.url, args.repeat))
                )
                picker = []
                if web.get("/admin/queues/names").status_code == 200:  # not in older trees
                    suggest = meter.median("/admin/queues/names?queue=q09")
                    picker = [("queue picker suggestions for 'q09'", suggest)]
        finally:
            gateway.terminate()
            gateway.wait(15)
    print(f"\nmedian of {args.repeat} samples of {args.batch} requests each\n")
    table(queues_rows + picker + at_one + at_many)
    if summary is not None:
        print(
            f"\nreading {QUEUES:,} queues' numbers of queued tasks (the summary), in-process: "
            f"{summary:.1f} ms"
        )


if __name__ == "__main__":
    main()
