"""The gateway process's cyclic garbage collector, set for how the gateway allocates.

Every request and every push allocates short-lived containers (coroutines, futures, dicts,
records). With CPython's default threshold (a collection of the youngest generation every 700
allocations net of frees) the collector ran about 1,300 times in a 10,000-task drain and took
about a sixth of the gateway's CPU; at 20,000 it ran about 12 times for 2 % (bench/RESULTS.md,
"Garbage collection"). Reference counting frees almost everything the gateway makes at once: a
higher threshold only lets the rare cyclic garbage wait a little longer.

Only the gateway's own process entry points call these (``jobgate serve`` and ``jobgate dev``),
never an import: a gateway run inside another program (tests, an embedding app) leaves that
program's collector alone.
"""

from __future__ import annotations

import gc


def tune(threshold: int) -> None:
    """Collect the youngest generation every ``threshold`` allocations; 0 keeps Python's."""
    if threshold > 0:
        _, middle, oldest = gc.get_threshold()
        gc.set_threshold(threshold, middle, oldest)


def freeze_startup() -> None:
    """Once the gateway has started: take what lives now (modules, the app, its caches) out of
    every later collection, so a full collection walks only what was made since."""
    gc.collect()
    gc.freeze()
