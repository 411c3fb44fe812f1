"""Redis's instructions per task of each hot script, counted by callgrind: repeatable on a loaded
machine, where ``bench/script_cost.py``'s microseconds move with the neighbours.

Starts ``redis-server`` under ``valgrind --tool=callgrind`` (no persistence), then runs
``bench/script_cost.py``'s phases through the store: ``--tasks`` no-op tasks enqueued in batches
of 500, claimed ``--claim`` at a time, each claim's tasks finished as succeeded in one call. The
counters are zeroed before and dumped after each phase (``callgrind_control``), so each phase's
figure is the whole server's work for it: reading the commands, the scripts, the answers.
Compare two trees by running this file with each one's ``PYTHONPATH``. Run:
``.venv/bin/python -m bench.script_instructions``.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import socket
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from redis.asyncio import Redis
from ulid import ULID

from gateway.clock import ManualClock
from gateway.store.queues import QueueStore
from gateway.store.records import EndpointRecord, Lease, NewTask
from gateway.store.scripts import Scripts
from gateway.store.tasks import Finish, TaskStore
from sdk.wire import AttemptOutcome, QueuePolicy

PAYLOAD = '{"args":[],"kwargs":{}}'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def zero(pid: int) -> None:
    subprocess.run(["callgrind_control", "-z", str(pid)], check=True, capture_output=True)


def instructions(out: Path, pid: int, dumps: int) -> int:
    """Dump the counters since the last zero (or dump) and return the instructions in it."""
    subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True)
    dump = out.with_name(f"{out.name}.{dumps}")
    deadline = time.monotonic() + 60
    while not dump.exists() or "totals:" not in dump.read_text():
        if time.monotonic() > deadline:
            raise SystemExit(f"no callgrind dump at {dump}")
        time.sleep(0.2)
    for line in dump.read_text().splitlines():
        if line.startswith("totals:"):
            return int(line.split()[1])
    raise AssertionError("unreachable")


async def run(
    url: str, pid: int, out: Path, tasks: int, claim: int, payload: str
) -> dict[str, int]:
    redis = Redis.from_url(url, decode_responses=True)
    scripts = Scripts(redis)
    await scripts.load()
    store, queues, clock = TaskStore(redis, scripts), QueueStore(redis, scripts), ManualClock()
    await queues.put("q", QueuePolicy(max_concurrency=100_000), clock.now_ms())
    await queues.add_endpoint(
        EndpointRecord(
            id="ep1",
            queue="q",
            url="http://127.0.0.1:1/",
            concurrency=100_000,
            capabilities=[],
            secrets=["whsec_x"],
            created_ms=clock.now_ms(),
        )
    )
    leases: list[list[Lease]] = []

    async def enqueue() -> None:
        for start in range(0, tasks, 500):
            now = clock.now_ms()
            batch = [
                NewTask(
                    id=str(ULID()),
                    name="noop",
                    payload_json=payload,
                    priority=0,
                    created_ms=now,
                    run_at_ms=now,
                )
                for _ in range(min(500, tasks - start))
            ]
            await store.enqueue("q", batch, now)

    async def claim_all() -> None:
        done = 0
        while done < tasks:
            got = await store.claim("q", claim, secrets.token_hex(16), clock.now_ms())
            leases.append(got.leases)
            done += len(got.leases)

    async def finish_all() -> None:
        for group in leases:
            ends = [
                Finish(lease.task_id, lease.token, AttemptOutcome.SUCCEEDED, 200, "null")
                for lease in group
            ]
            await store.finish_many("q", ends, clock.now_ms())

    phases: list[tuple[str, Callable[[], Awaitable[None]]]] = [
        ("enqueue", enqueue),
        ("claim", claim_all),
        ("finish", finish_all),
    ]
    found = {}
    for dumps, (phase, work) in enumerate(phases, start=1):
        await asyncio.to_thread(zero, pid)
        await work()
        found[phase] = await asyncio.to_thread(instructions, out, pid, dumps)
    await redis.aclose()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=5_000)
    parser.add_argument("--claim", type=int, default=32)
    parser.add_argument("--payload", default=PAYLOAD, help="each task's payload JSON")
    parser.add_argument(
        "--keep", type=Path, help="write callgrind's dumps here (callgrind_annotate reads them)"
    )
    args = parser.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        out = (args.keep or Path(tmp)) / "callgrind.out"
        server = subprocess.Popen(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                "redis-server",
                "--port",
                str(port),
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                tmp,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            url = f"redis://127.0.0.1:{port}/0"
            deadline = time.monotonic() + 60
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise SystemExit("redis-server under callgrind did not start") from None
                    time.sleep(0.2)
            found = asyncio.run(run(url, server.pid, out, args.tasks, args.claim, args.payload))
        finally:
            server.terminate()
            server.wait(timeout=60)
    print(f"\n{args.tasks:,} tasks, claims of {args.claim}: Redis instructions per task\n")
    print("| phase | instructions per task |")
    print("| --- | --: |")
    for phase, count in found.items():
        print(f"| {phase} | {count / args.tasks:,.0f} |")


if __name__ == "__main__":
    main()
