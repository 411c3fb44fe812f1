#!/usr/bin/env bash
# `make bench`: the end-to-end benchmark (median of 3 runs), then, with BENCH_ALL=1, the push
# client comparison too. Loopback only; results go to stdout, to be copied into RESULTS.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
.venv/bin/python bench/e2e.py "$@"
if [ "${BENCH_ALL:-0}" = "1" ]; then
  .venv/bin/python bench/push_clients.py
fi
