#!/usr/bin/env bash
# `make bench`, and the benchmark's named suites (bench/README.md says what each measures, how
# long it takes and what it prints):
#
#   bash bench/run.sh [FLAGS]              all: what `make bench` runs (below)
#   bash bench/run.sh races [FLAGS]        issue 20's two races alone (bench/peers.py FLAGS)
#   bash bench/run.sh latency [FLAGS]      enqueue to start (bench/latency.py FLAGS)
#   bash bench/run.sh growth [--quick]     cost against queue depth, busy queues, scheduled tasks,
#                                          jobs, idle queues and the admin UI at 1,000 queues
#   bash bench/run.sh cpu [--quick]        CPU per task of each part of the path, alone
#
# From make: `make bench BENCH_ARGS='latency --quick'`.
#
# all: Jobgate side by side with Dramatiq, taskiq and Celery in issue 20's two races,
# (a) Python functions and (b) the user's HTTP service (bench/peers.py, median of 3 runs at 1
# and 2 processes; it prints issue 20's targets met or not, then each race's ratios to the
# fastest peer, as Markdown for bench/RESULTS.md; its flags come from BENCH_ARGS, e.g.
# BENCH_ARGS=--quick for a smoke run, BENCH_ARGS='--races http'), then how cost grows at 1,000
# busy queues, 1,000,000 scheduled tasks and 10,000 jobs (bench/growth.py, issue 32's three
# growth targets met or not; about 20 minutes, 4 with --quick; BENCH_GROWTH=0 skips it), then the idle
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
PY=.venv/bin/python

# Whether the suite's flags ask for its smoke run.
quick() {
  local flag
  for flag in "$@"; do [ "$flag" = "--quick" ] && return 0; done
  return 1
}

case "${1:-}" in
  races)
    shift
    exec $PY bench/peers.py "$@"
    ;;
  latency)
    shift
    if quick "$@"; then
      exec $PY -m bench.latency --idle-only --samples 200 --rate 50 --one-at-a-time 100
    fi
    exec $PY -m bench.latency "$@"
    ;;
  growth)
    shift
    if quick "$@"; then
      $PY -m bench.depth --depths 1000,100000 --drain 2000
      $PY -m bench.growth --quick
      $PY -m bench.idle --queues 0 100 --window 65
      $PY -m bench.admin_scale --repeat 1
    else
      $PY -m bench.depth
      $PY -m bench.growth
      $PY -m bench.idle --queues 0 10 100 --tasks
      $PY -m bench.admin_scale
    fi
    exit 0
    ;;
  cpu)
    shift
    if quick "$@"; then
      $PY -m bench.enqueue_cpu --quick
      $PY -m bench.batch_enqueue --quick
      $PY -m bench.script_cost --tasks 5000
      $PY -m bench.dispatch_cost --tasks 5000 --repeat 1
      $PY -m bench.worker_overhead --pushes 5000
      for layout in "" --compact-records; do $PY -m bench.memory_layout --tasks 5000 $layout; done
    else
      $PY -m bench.enqueue_cpu
      $PY -m bench.batch_enqueue
      $PY -m bench.script_cost
      $PY -m bench.dispatch_cost
      $PY -m bench.worker_overhead
      for layout in "" --compact-records; do $PY -m bench.memory_layout $layout; done
      if command -v valgrind > /dev/null; then $PY -m bench.script_instructions; fi
    fi
    exit 0
    ;;
  all)
    shift
    ;;
  -* | "") ;;
  *)
    echo "bench/run.sh: no suite '$1' (all, races, latency, growth, cpu; bench/README.md)" >&2
    exit 2
    ;;
esac

$PY bench/peers.py "$@"
if [ "${BENCH_GROWTH:-1}" = "1" ]; then  # issue 32's growth targets, met or not
  if quick "$@"; then $PY -m bench.growth --quick; else $PY -m bench.growth; fi
fi
if [ "${BENCH_COLD:-1}" = "1" ]; then
  rm -rf bench/out/sdk-venv dist/jobgate_sdk-*  # the wheel of this tree, installed afresh
  $PY -m build --outdir dist packaging/jobgate-sdk >&2
  $PY -m bench.cold_start --light --repeat 5
fi
if [ "${BENCH_TRACING:-0}" = "1" ]; then
  $PY -m bench.tracing
fi
if [ "${BENCH_MORE:-0}" = "1" ]; then
  $PY -m bench.http_server
  for gateways in 1 2; do $PY -m bench.gateways_share "$gateways" 2; done
  $PY -m bench.depth
  $PY -m bench.cluster
  $PY -m bench.script_cost
  $PY -m bench.worker_overhead
fi
if [ "${BENCH_E2E:-0}" = "1" ]; then
  $PY bench/e2e.py
fi
if [ "${BENCH_ALL:-0}" = "1" ]; then
  $PY -m bench.idle --tasks
elif [ "${BENCH_IDLE:-1}" = "1" ]; then
  $PY -m bench.idle
fi
