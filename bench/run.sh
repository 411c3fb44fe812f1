#!/usr/bin/env bash
# `make bench`: Jobgate side by side with Dramatiq, taskiq and Celery in issue 20's two races,
# (a) Python functions and (b) the user's HTTP service (bench/peers.py, median of 3 runs at 1
# and 2 processes; it prints issue 20's targets met or not, then each race's ratios to the
# fastest peer, as Markdown for bench/RESULTS.md; its flags come from BENCH_ARGS, e.g.
# BENCH_ARGS=--quick for a smoke run, BENCH_ARGS='--races http'), then the idle
# cost with 0, 10 and 100 queues (about 7 minutes; BENCH_IDLE=0 skips it), then, with
# BENCH_ALL=1, the idle cost of queues holding far-off due times too. BENCH_E2E=1 adds Jobgate's
# own end-to-end benchmark (bench/e2e.py: sequential enqueue, two gateways with --gateways 2);
# BENCH_TRACING=1 the tracing overhead (bench/tracing.py, about 10 minutes). BENCH_MORE=1 adds
# the HTTP server comparison (bench/http_server.py), 1 against 2 gateways (bench/gateways_share.py),
# queue depth (bench/depth.py: 1,000 against 1,000,000 queued), one Redis against a
# three-primary cluster (bench/cluster.py), Redis time per hot script (bench/script_cost.py)
# and the SDK worker's own CPU per push (bench/worker_overhead.py), about 11 minutes together.
# Then the SDK's cold start beside the peers' imports (bench/cold_start.py, in a virtualenv of the
# jobgate-sdk wheel alone, bench/out/sdk-venv; about 3 minutes; BENCH_COLD=0 skips it).
# Loopback only; results go to stdout (progress to stderr), to be copied into RESULTS.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
.venv/bin/python bench/peers.py "$@"
if [ "${BENCH_COLD:-1}" = "1" ]; then
  rm -rf bench/out/sdk-venv dist/jobgate_sdk-*  # the wheel of this tree, installed afresh
  .venv/bin/python -m build --outdir dist packaging/jobgate-sdk >&2
  .venv/bin/python -m bench.cold_start --light --repeat 5
fi
if [ "${BENCH_TRACING:-0}" = "1" ]; then
  .venv/bin/python -m bench.tracing
fi
if [ "${BENCH_MORE:-0}" = "1" ]; then
  .venv/bin/python -m bench.http_server
  for gateways in 1 2; do .venv/bin/python -m bench.gateways_share "$gateways" 2; done
  .venv/bin/python -m bench.depth
  .venv/bin/python -m bench.cluster
  .venv/bin/python -m bench.script_cost
  .venv/bin/python -m bench.worker_overhead
fi
if [ "${BENCH_E2E:-0}" = "1" ]; then
  .venv/bin/python bench/e2e.py
fi
if [ "${BENCH_ALL:-0}" = "1" ]; then
  .venv/bin/python -m bench.idle --tasks
elif [ "${BENCH_IDLE:-1}" = "1" ]; then
  .venv/bin/python -m bench.idle
fi
