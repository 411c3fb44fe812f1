"""Redis's instructions per task of each hot script, counted by callgrind: repeatable on a loaded
machine, where ``bench/script_cost.py``'s microseconds move with the neighbours.

Starts ``redis-server`` under ``valgrind --tool=callgrind`` (no persistence), then runs
``bench/script_cost.py``'s phases through the store: ``--tasks`` no-op tasks enqueued in batches
of ``--batch`` (500; ``--deep`` tasks wait in another queue first), claimed ``--claim`` at a
time, each claim's tasks finished as succeeded in one call. The counters are zeroed before and
dumped after each phase (``callgrind_control``), so each phase's figure is the whole server's
work for it: reading the commands, the scripts, the answers. Compare two trees by running this
file with each one's ``PYTHONPATH``. Run: ``.venv/bin/python -m bench.script_instructions``.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from redis.asyncio import Redis

from bench.script_cost import PAYLOAD, phases


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


async def run(url: str, pid: int, out: Path, args: argparse.Namespace) -> dict[str, int]:
    redis = Redis.from_url(url, decode_responses=True)
    found = {}
    steps = await phases(
        redis,
        args.tasks,
        args.claim,
        args.payload,
        batch=args.batch,
        deep=args.deep,
        compact_records=args.compact_records,
    )
    for dumps, (phase, work) in enumerate(steps, start=1):
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
    parser.add_argument("--batch", type=int, default=500, help="tasks per enqueue call")
    parser.add_argument(
        "--deep", type=int, default=0, help="tasks waiting in another queue first (not counted)"
    )
    parser.add_argument(
        "--compact-records", action="store_true", help="the gateway's compact_records setting"
    )
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
            found = asyncio.run(run(url, server.pid, out, args))
        finally:
            server.terminate()
            server.wait(timeout=60)
    print(
        f"\n{args.tasks:,} tasks enqueued {args.batch} a call ({args.deep:,} waiting elsewhere), "
        f"claims of {args.claim}{', compact records' if args.compact_records else ''}: Redis "
        "instructions per task\n"
    )
    print("| phase | instructions per task |")
    print("| --- | --: |")
    for phase, count in found.items():
        print(f"| {phase} | {count / args.tasks:,.0f} |")


if __name__ == "__main__":
    main()
