"""A request's body written in the same step as its headers, on Python 3.11 as on 3.12+.

aiohttp writes a request's body from a task of its own (``ClientRequest.write_bytes``), made
once the headers are buffered. On Python 3.12 and later it starts that task eagerly, so a small
body goes out with its headers at once, in one write; on 3.11 the task's first step waits for
the next turn of the event loop, behind whatever else is ready then: on a lone task's path,
the producer's enqueue request (aiohttp called → written 0.69 to 0.78 times as long with this,
bench/RESULTS.md, "Latency: enqueue to start"). The gateway's pushes keep aiohttp's own writer:
written sooner, they delayed the producer's answer on the bench's two cores
(gateway/dispatch/pusher.py).

:class:`EagerBodyRequest` (a ``ClientSession``'s ``request_class``) does on 3.11 what aiohttp
does on 3.12: it runs the body writer's first step when aiohttp makes it, and hands the task
only what is left (nothing, for a body that fits the transport's buffer; else the rest, resumed
where it waited, as an eager task would be). The writer is aiohttp's own, unchanged; only when
its first step runs moves. On 3.12 and later the class is aiohttp's own.
"""

from __future__ import annotations

import sys
from collections.abc import Coroutine, Generator
from typing import Any

from aiohttp import ClientRequest

__all__ = ["EagerBodyRequest", "started"]


def started(coro: Coroutine[Any, Any, Any]) -> Coroutine[Any, Any, Any]:
    """Run ``coro``'s first step now; a coroutine that finishes it (returns its value, raises
    what it raises, resumes it where it waited)."""
    try:
        yielded = coro.send(None)
    except StopIteration as stop:
        return _returned(stop.value)
    except BaseException as e:  # the task that awaits the rest raises it
        return _raised(e)
    return _rest(coro, yielded)


async def _returned(value: Any) -> Any:
    return value


async def _raised(e: BaseException) -> Any:
    raise e


async def _rest(coro: Coroutine[Any, Any, Any], yielded: Any) -> Any:
    return await _Resumed(coro, yielded)


class _Resumed:
    """Awaiting it waits for what ``coro`` yielded at its first step, then drives ``coro`` on
    (what a task does with a coroutine, from its second step)."""

    def __init__(self, coro: Coroutine[Any, Any, Any], yielded: Any) -> None:
        self._coro = coro
        self._yielded = yielded

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, yielded = self._coro, self._yielded
        while True:
            try:
                sent = yield yielded
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as e:  # thrown in (a cancel): for coro to handle
                try:
                    yielded = coro.throw(e)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    yielded = coro.send(sent)
                except StopIteration as stop:
                    return stop.value


if sys.version_info >= (3, 12):
    EagerBodyRequest = ClientRequest  # aiohttp starts its body writer eagerly itself
else:

    class EagerBodyRequest(ClientRequest):
        """aiohttp's request, whose body writer's first step runs when it is made."""

        def write_bytes(self, *args: Any, **kwargs: Any) -> Coroutine[Any, Any, None]:
            return started(super().write_bytes(*args, **kwargs))
