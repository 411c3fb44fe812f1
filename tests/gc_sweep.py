"""An opt-in pytest plugin that names the test whose garbage holds an unclosed resource.

Under ``filterwarnings = ["error"]`` a socket (or transport, session, client) left in a
reference cycle warns when the garbage collector frees it, which may be during a later test of
the same worker, and fails that one. With ``-p tests.gc_sweep``, a full collection runs after
each test, with ResourceWarnings recorded instead of raised, and each is written, with the test
it followed, to ``$GC_SWEEP_OUT.<pid>`` (default ``/tmp/gc-sweep.<pid>``); with
``PYTHONTRACEMALLOC=N`` also where the object was allocated (that makes every test several
times slower: use it on the file the sweep named). Slow too without it (a full collection per
test): never on by default::

    pytest tests/sdk -n 2 -p tests.gc_sweep
"""

from __future__ import annotations

import gc
import os
import tracemalloc
import warnings
from collections.abc import Iterator

import pytest

OUT = os.environ.get("GC_SWEEP_OUT", "/tmp/gc-sweep")


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    result = yield
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        gc.collect()
    found = [w for w in caught if issubclass(w.category, ResourceWarning)]
    if found:
        with open(f"{OUT}.{os.getpid()}", "a") as out:
            for w in found:
                out.write(f"after {item.nodeid}: {w.message}\n")
                where = tracemalloc.get_object_traceback(w.source) if w.source else None
                if where is not None:
                    out.write("\n".join(where.format()) + "\n")
    return result
