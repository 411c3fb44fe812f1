#!/usr/bin/env bash
# Build a mypyc-compiled copy of this commit's push path in DEST (default /tmp/jobgate-mypyc), for
# bench/probes/mypyc_micro.py and bench/peers.py to compare against the pure tree
# (bench/HISTORY.md, "mypyc (issue 20)"). Not part of the install: the figures did not justify
# compiling.
#
#   bench/probes/mypyc_build.sh [DEST]
#   cd DEST && PYTHONPATH=$PWD ../path/to/.venv/bin/python -m bench.probes.mypyc_micro
#
# The .so files sit beside the .py files in DEST; Python imports an extension module before
# the source of the same name, so DEST runs compiled and the repository stays pure.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DEST=${1:-/tmp/jobgate-mypyc}
MYPYC=${MYPYC:-$ROOT/.venv/bin/mypyc}

# Left out: sdk/worker.py (mypyc: "async generators are unimplemented", the
# @asynccontextmanager lifespan) and gateway/store/records.py (with the pydantic mypy plugin the
# generated C names an undeclared CPyModule_pydantic___main; without the plugin mypy rejects
# pydantic Field defaults elsewhere).
MODULES=(
    gateway/dispatch/batching.py
    gateway/dispatch/dispatcher.py
    gateway/dispatch/notices.py
    gateway/dispatch/pusher.py
    gateway/dispatch/verdict.py
    sdk/pushes.py
    sdk/runner.py
    sdk/signatures.py
)

rm -rf "$DEST"
mkdir -p "$DEST"
git -C "$ROOT" archive HEAD | tar -x -C "$DEST"
cd "$DEST"
time "$MYPYC" "${MODULES[@]}"
