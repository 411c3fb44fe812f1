#!/usr/bin/env bash
# `make bench`: the end-to-end benchmark (median of 3 runs; flags go to bench/e2e.py). Loopback
# only; results go to stdout, to be copied into RESULTS.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
.venv/bin/python bench/e2e.py "$@"
