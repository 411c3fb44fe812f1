"""Idle cost: what one gateway process costs with N registered queues and no work at all.

Starts a managed Redis and one gateway process (``python -m gateway serve``), registers N queues
with one endpoint each (nothing listens there), lets the gateway settle, then measures over a
window. With ``--tasks``, each queue also holds a task delayed by an hour and a cancelled one
kept for its retention, so every queue has an entry in the due index, hours ahead. Measured:

- the gateway process's CPU, from ``/proc/<pid>/stat`` (user + system), as % of one core;
- the commands Redis ran, from ``INFO stats`` ``total_commands_processed`` before and after
  (minus the measurement's own INFO), as commands/s, and the commands that made them up
  (``INFO commandstats`` deltas). Redis counts the commands a script runs as well as the
  EVALSHA that ran it.

Each N runs on a fresh Redis and gateway. The default window (130 s) holds two of the gateway's
rescans of every queue (``rescan_interval``, 60 s), its only idle work that grows with N. Run
from the repository root: ``.venv/bin/python -m bench.idle`` (``--queues 0 10 100 --tasks``).
Loopback only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

from bench.e2e import KEY, ROOT, wait_http
from bench.proc_stat import cpu_seconds
from gateway.serving.redis_server import ManagedRedis, free_port
from sdk import Client


def _commandstats(client: redis.Redis) -> dict[str, int]:
    stats = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}


def measure(
    queues: int, settle: float, window: float, tasks: bool
) -> tuple[float, float, dict[str, float]]:
    """Gateway CPU (% of a core), Redis commands/s, and commands/s by command."""
    with tempfile.TemporaryDirectory() as tmp, ManagedRedis(Path(tmp)) as managed:
        port = free_port()
        env = {
            **os.environ,
            "JOBGATE_REDIS_URL": managed.url,
            "JOBGATE_API_KEYS": json.dumps([{"key": KEY, "scopes": ["admin"]}]),
            "JOBGATE_ALLOW_PRIVATE_ENDPOINTS": "true",
            "JOBGATE_LOG_LEVEL": "warning",
            "JOBGATE_PORT": str(port),
        }
        url = f"http://127.0.0.1:{port}"
        gateway = subprocess.Popen([sys.executable, "-m", "gateway", "serve"], env=env, cwd=ROOT)
        try:
            wait_http(url + "/healthz", gateway)
            with Client(url, KEY) as client:
                for i in range(queues):
                    name = f"idle-{i:03d}"
                    client.put_queue(name)
                    client.add_endpoint(name, f"http://127.0.0.1:{free_port()}/")
                    if tasks:
                        client.enqueue(name, "later", delay=3600)
                        client.cancel(client.enqueue(name, "dropped", delay=3600).id)
            time.sleep(settle)
            with redis.Redis.from_url(managed.url) as r:
                before_cmds = _commandstats(r)
                before_total = int(r.info("stats")["total_commands_processed"])
                before_cpu = cpu_seconds(gateway.pid)
                start = time.monotonic()
                time.sleep(window)
                elapsed = time.monotonic() - start
                cpu = cpu_seconds(gateway.pid) - before_cpu
                # The first INFO stats is counted in the second's total; the second is not.
                total = int(r.info("stats")["total_commands_processed"]) - before_total - 1
                after_cmds = _commandstats(r)
        finally:
            gateway.terminate()
            gateway.wait(15)
    by_command = {
        name: (calls - before_cmds.get(name, 0)) / elapsed
        for name, calls in after_cmds.items()
        if name != "info" and calls > before_cmds.get(name, 0)
    }
    return 100 * cpu / elapsed, total / elapsed, by_command


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queues", type=int, nargs="+", default=[0, 10, 100])
    parser.add_argument("--settle", type=float, default=5.0, help="seconds before measuring")
    parser.add_argument("--window", type=float, default=130.0, help="seconds measured")
    parser.add_argument(
        "--tasks", action="store_true", help="also measure queues holding far-off due times"
    )
    args = parser.parse_args()
    print(f"idle gateway, {args.window:.0f} s window after {args.settle:.0f} s settling\n")
    print("| queues | tasks | gateway CPU (% of a core) | Redis commands/s | commands (per s) |")
    print("| --: | --- | --: | --: | --- |")
    for tasks in (False, True) if args.tasks else (False,):
        for n in args.queues:
            if tasks and n == 0:
                continue
            cpu, rate, by_command = measure(n, args.settle, args.window, tasks)
            top = ", ".join(
                f"{name} {calls:.2f}"
                for name, calls in sorted(by_command.items(), key=lambda kv: -kv[1])[:6]
            )
            held = "2 per queue" if tasks else "none"
            print(f"| {n} | {held} | {cpu:.2f} | {rate:.2f} | {top or '-'} |", flush=True)


if __name__ == "__main__":
    main()
