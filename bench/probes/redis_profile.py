"""Where Redis's time goes per task: each script and command, from Redis's own slow log.

A fresh system (managed Redis, one gateway, the bench worker); the slow log records every
command (``slowlog-log-slower-than 0``) with its execution time. ``--tasks`` no-op tasks are
enqueued in batches of 500 into a paused queue, then drained; this is done for the one-push
queue and for the batched one. For each phase it prints, per script (EVALSHA, named from its
SHA) and per plain command: calls per task and µs per task, beside the Redis process's whole CPU
per task from ``/proc`` (which also counts reading, parsing and answering commands, and pub/sub).
Run: ``.venv/bin/python -m bench.probes.redis_profile`` (``--tasks 2000`` for a quicker run).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import redis
from redis.asyncio import Redis as AsyncRedis

from bench.e2e import KEY, enqueue_batches, jobgate
from bench.proc_stat import cpu_seconds
from gateway.serving.redis_server import ManagedRedis
from gateway.store.scripts import SCRIPT_NAMES, Scripts
from sdk import Client, TaskState

SLOWLOG_LEN = 2_000_000


def script_names() -> dict[str, str]:
    scripts = Scripts(AsyncRedis())  # never connects: only the SHAs are read
    return {scripts.sha(name): name for name in SCRIPT_NAMES}


def read_slowlog(r: redis.Redis, names: dict[str, str]) -> dict[str, list[int]]:
    """name → [calls, µs] of everything logged since the last reset; then resets."""
    found: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for entry in r.execute_command("SLOWLOG", "GET", SLOWLOG_LEN):
        _id, _at, usec, args = entry[:4]
        command = args[0].decode().lower()
        if command == "evalsha":
            command = "script " + names.get(args[1].decode(), args[1].decode()[:8])
        if command.startswith("slowlog"):
            continue
        found[command][0] += 1
        found[command][1] += int(usec)
    r.execute_command("SLOWLOG", "RESET")
    return found


def report(phase: str, found: dict[str, list[int]], tasks: int, redis_cpu: float) -> None:
    total = sum(usec for _calls, usec in found.values())
    print(f"\n### {phase}: {tasks:,} tasks\n")
    print("| command | calls per task | µs per task | share of logged |")
    print("| --- | --: | --: | --: |")
    for name, (calls, usec) in sorted(found.items(), key=lambda item: -item[1][1]):
        print(f"| {name} | {calls / tasks:.3f} | {usec / tasks:.2f} | {usec / total:.0%} |")
    print(f"| **logged, all commands** | | **{total / tasks:.2f}** | |")
    print(f"| **Redis process CPU** | | **{redis_cpu / tasks * 1e6:.2f}** | |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    args = parser.parse_args()
    names = script_names()
    with tempfile.TemporaryDirectory() as tmp, ManagedRedis(Path(tmp)) as server:
        pid = server.process.pid if server.process else 0
        r = redis.Redis.from_url(server.url)
        with jobgate(server.url, pid, 1, 128) as (urls, _cpu), Client(urls[0], KEY) as client:
            r.config_set("slowlog-max-len", SLOWLOG_LEN)
            for queue in ("bench", "bench-batch"):
                r.config_set("slowlog-log-slower-than", 0)
                r.execute_command("SLOWLOG", "RESET")
                before = cpu_seconds(pid)
                enqueue_batches(urls, args.tasks, queue)
                report(
                    f"enqueue ({queue})",
                    read_slowlog(r, names),
                    args.tasks,
                    cpu_seconds(pid) - before,
                )
                before = cpu_seconds(pid)
                client.patch_queue(queue, paused=False)
                while client.get_queue(queue).counts[TaskState.SUCCEEDED] < args.tasks:
                    time.sleep(0.05)  # polling the count; the drain takes seconds
                client.patch_queue(queue, paused=True)
                report(
                    f"drain ({queue})",
                    read_slowlog(r, names),
                    args.tasks,
                    cpu_seconds(pid) - before,
                )
                r.config_set("slowlog-log-slower-than", 10_000)
        r.close()


if __name__ == "__main__":
    main()
