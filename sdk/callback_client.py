"""A worker's callback client as its attempts see it: loaded in the background, opened at the
first callback.

The runner (:mod:`sdk.runner`) owns the session; :class:`FirstUse` is what its attempts' callback
channels (:mod:`sdk.callbacks`) send through, and :func:`preload` loads the session's modules
while the worker starts serving.
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sdk.answers import Answer, Params
    from sdk.sessions import Session

__all__ = ["SESSIONS", "FirstUse", "preload"]

SESSIONS = "sdk.sessions"


def preload(module: str) -> None:
    """Import ``module`` in a thread, unless it is imported already.

    The callback client (aiohttp, httpx: about a tenth of a second of CPU) is loaded while the
    worker starts serving, not before its lifespan's startup completes nor at the first
    callback: imported there, on the event loop, it delayed a task's first heartbeat past a
    short lease on a loaded machine (tests/e2e/test_cloud_run_example.py), and stalled every
    push in the meantime. A callback that comes before the thread is done waits for it (the
    import lock): the module is imported once."""
    if module not in sys.modules:
        threading.Thread(
            target=importlib.import_module, args=(module,), name=f"preload {module}"
        ).start()


class FirstUse:
    """The callback session as the attempts see it: the runner's session, opened at the first
    callback sent (its modules are loaded in the background from the lifespan's start on:
    :func:`preload`)."""

    __slots__ = ("_opener",)

    def __init__(self, opener: Callable[[], Session]) -> None:
        self._opener = opener  # the runner's session, opened if it is not yet (Runner._client)

    async def request(
        self,
        method: str,
        url: str,
        *,
        params: Params | None = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float,
    ) -> Answer:
        http = self._opener()
        return await http.request(
            method, url, params=params, content=content, headers=headers, timeout=timeout
        )

    async def aclose(self) -> None:
        pass  # the runner closes its session (Runner.close)
