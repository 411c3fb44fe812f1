"""The gateway under uvicorn (httptools, the default without TLS) against Hypercorn, in one run.

Fresh systems alternate (uvicorn, Hypercorn, uvicorn, …; ``JOBGATE_SERVER``), each measuring
single-task enqueues with 64 in flight (the SDK's async client) into a paused queue, then an
end-to-end drain of one push per task, with the gateway's CPU per request and per task from
``/proc``. Medians and the uvicorn ÷ Hypercorn ratio are printed as Markdown.
Run: ``.venv/bin/python -m bench.http_server`` (``--quick``: one pair, fewer tasks).
"""

from __future__ import annotations

import argparse
import statistics

from bench.e2e import KEY, end_to_end, enqueue_concurrent, fresh_queue, system
from sdk import Client

SERVERS = ("uvicorn", "hypercorn")


def measure(server: str, enqueues: int, tasks: int) -> dict[str, float]:
    found: dict[str, float] = {}
    with system(1, worker_concurrency=128, gateway_env={"JOBGATE_SERVER": server}) as (urls, cpu):
        with Client(urls[0], KEY) as client:
            queue = fresh_queue(client, "enqueue-many")
        enqueue_concurrent(urls, 500, queue)  # warm up connections and caches
        before = cpu()["gateway0"]
        found["enqueue, 1 per request, 64 in flight: tasks/s"] = enqueue_concurrent(
            urls, enqueues, queue
        )
        found["enqueue: gateway CPU µs/request"] = (cpu()["gateway0"] - before) / enqueues * 1e6
        before = cpu()["gateway0"]
        found["drain, one push each: tasks/s"] = end_to_end(urls, tasks, "bench")
        found["drain: gateway CPU µs/task"] = (cpu()["gateway0"] - before) / tasks * 1e6
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--enqueues", type=int, default=5_000)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.pairs, args.enqueues, args.tasks = 1, 1_000, 1_000
    runs: dict[str, list[dict[str, float]]] = {s: [] for s in SERVERS}
    for pair in range(args.pairs):
        for server in SERVERS:
            found = measure(server, args.enqueues, args.tasks)
            print(f"pair {pair + 1}/{args.pairs}, {server}: {found}", flush=True)
            runs[server].append(found)
    print(f"\n{args.pairs} pair(s) of fresh systems.\n")
    print("| measurement | uvicorn | Hypercorn | uvicorn / Hypercorn |")
    print("| --- | --: | --: | --: |")
    for name in runs[SERVERS[0]][0]:
        uv, hy = (statistics.median(r[name] for r in runs[s]) for s in SERVERS)
        print(f"| {name} | {uv:,.1f} | {hy:,.1f} | {uv / hy:.3f} |")


if __name__ == "__main__":
    main()
