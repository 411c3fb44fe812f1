"""System calls and event-loop turns per lone task, gateway and worker, counted by strace.

Starts what ``bench/latency.py`` starts (a managed Redis, one gateway, the bench SDK worker),
sends 100 stamp tasks to warm up, then attaches ``strace -c -f`` to the gateway and to the
worker (its uvicorn process and children) and sends ``--tasks`` stamp tasks at ``--rate`` per
second through one of the ways in of ``bench/enqueue_answers.py``, twice: untraced, counting
the voluntary context switches of ``/proc/<pid>/status`` (the times the process slept and was
woken), then traced. Prints, per process and per task: every system call, and the
``epoll_pwait`` calls among them (one per turn of the event loop: uvloop's libuv polls once per
turn).

Counts, not microseconds: they do not move with the machine's load, so two trees compare in one
run each. The counts include each task's read-back (one long poll per task, after the paced
run; the same for every tree) and the dispatcher's and recoverer's own loops over the run.

Run: ``.venv/bin/python -m bench.probes.syscalls --tasks 500 --way .delay()``; for another tree,
``PYTHONPATH=<tree>`` and run it from there.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import subprocess
import time
from pathlib import Path

from bench.e2e import KEY, system
from bench.enqueue_answers import QUEUE, PlainPost, ways
from bench.peers_session import paced
from bench.proc_stat import descendants
from sdk import AsyncClient, Client, TaskState

WARM_UP = 100
SUMMARY = re.compile(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)$")


def role_of(pid: int) -> str | None:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return None
    if "gateway serve" in command:
        return "gateway"
    if "bench.worker_app" in command:
        return "worker"
    return None


def switches(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"voluntary_ctxt_switches:\s+(\d+)", status)[1])  # type: ignore[index]


def counted(out: Path) -> dict[str, int]:
    """System calls by name from ``strace -c``'s table."""
    found: dict[str, int] = {}
    for line in out.read_text().splitlines():
        match = SUMMARY.match(line)
        if match and match[2] != "total":
            found[match[2]] = int(match[1])
    return found


async def run(url: str, way: str, tasks: int, rate: float) -> None:
    """``tasks`` stamp tasks sent, then waited for by their count of successes (a few reads in
    all, not one per task)."""
    plain = PlainPost(url)
    try:
        async with AsyncClient(url, KEY, timeout=60) as reader:
            with Client(url, KEY, timeout=60) as client:
                send = ways(reader, client, plain)[way]
                done = client.get_queue(QUEUE).counts[TaskState.SUCCEEDED]

                async def one(index: int) -> None:
                    await send(index)

                await paced(tasks, rate, one)
                deadline = time.monotonic() + 60
                while client.get_queue(QUEUE).counts[TaskState.SUCCEEDED] < done + tasks:
                    assert time.monotonic() < deadline, "the stamp tasks did not all run"
                    await asyncio.sleep(0.1)
    finally:
        plain.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument(
        "--way", choices=("AsyncClient.enqueue", ".delay()", "plain POST"), default=".delay()"
    )
    parser.add_argument("--out", type=Path, default=Path("/tmp"))
    args = parser.parse_args()
    with system(1, worker_concurrency=128) as (urls, _), Client(urls[0], KEY) as admin:
        admin.patch_queue("bench", paused=False)
        asyncio.run(run(urls[0], args.way, WARM_UP, args.rate))
        roles: dict[str, list[int]] = {}
        for pid in descendants(os.getpid()):
            role = role_of(pid)
            if role is not None:
                roles.setdefault(role, []).append(pid)
        # The wake-ups first, untraced (strace's stops would count as switches).
        before = {role: sum(map(switches, pids)) for role, pids in roles.items()}
        asyncio.run(run(urls[0], args.way, args.tasks, args.rate))
        after = {role: sum(map(switches, pids)) for role, pids in roles.items()}
        tracers = {}
        for role, pids in roles.items():
            out = args.out / f"syscalls-{role}-{os.getpid()}.txt"
            command = ["strace", "-c", "-f", "-o", str(out)]
            for pid in pids:
                command += ["-p", str(pid)]
            tracers[role] = (subprocess.Popen(command, stderr=subprocess.DEVNULL), out)
        time.sleep(1)  # strace attaches
        asyncio.run(run(urls[0], args.way, args.tasks, args.rate))
        for tracer, _ in tracers.values():
            tracer.send_signal(signal.SIGINT)
            tracer.wait(30)
    print(f"per task, {args.tasks} tasks at {args.rate:g}/s through {args.way}:")
    for role, (_, out) in tracers.items():
        calls = counted(out)
        total = sum(calls.values()) / args.tasks
        turns = (calls.get("epoll_wait", 0) + calls.get("epoll_pwait", 0)) / args.tasks
        woken = (after[role] - before[role]) / args.tasks
        top = sorted(calls.items(), key=lambda item: -item[1])[:8]
        shown = ", ".join(f"{name} {count / args.tasks:.2f}" for name, count in top)
        print(f"  {role}: {total:.1f} system calls, {turns:.2f} loop turns (epoll_pwait),")
        print(f"    {woken:.2f} wake-ups (voluntary switches); {shown}")


if __name__ == "__main__":
    main()
