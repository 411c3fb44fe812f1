#!/usr/bin/env bash
# `make bench`: the end-to-end benchmark (median of 3 runs), then the idle cost with 0, 10 and
# 100 queues (about 7 minutes; BENCH_IDLE=0 skips it), then, with BENCH_ALL=1, the idle cost of
# queues holding far-off due times too; with BENCH_TRACING=1, the tracing overhead
# (bench/tracing.py, about 10 minutes). Loopback only; results go to stdout, to be copied into
# RESULTS.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
.venv/bin/python bench/e2e.py "$@"
if [ "${BENCH_TRACING:-0}" = "1" ]; then
  .venv/bin/python -m bench.tracing
fi
if [ "${BENCH_ALL:-0}" = "1" ]; then
  .venv/bin/python -m bench.idle --tasks
elif [ "${BENCH_IDLE:-1}" = "1" ]; then
  .venv/bin/python -m bench.idle
fi
