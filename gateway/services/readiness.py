"""Readiness: can this gateway do its work now? What ``GET /readyz`` answers.

Ready means: Redis answers, it holds every Lua script (those it lacks, after a restart without
persistence or a failover, are loaded again here, as the first script call would), and the
background loops run (recoverer, dispatcher, job firing, completion callbacks, the scheduler of
the slow jobs) and none of them is *stalled*: a loop whose last turn failed (Redis did not
answer it) has not yet caught up with what came due meanwhile, even though Redis may answer the
probe already. A gateway that is not ready still serves what it can; the probe tells a load
balancer or Kubernetes to send traffic elsewhere until it is.

The probe is unauthenticated, so it must not become a way to load Redis: one check (one
``SCRIPT EXISTS``, which proves Redis answers too) serves every probe for ``ttl`` seconds, and
concurrent probes share the check under way. The loops are looked at by every probe (that asks
nothing of Redis), so a loop stalled or caught up since the last check is seen at once. A check
waits at most ``timeout`` seconds for Redis, so a hung Redis makes the probe answer 503, not
hang. Reasons name the kind of failure only (the error's text, with Redis's address, goes to
the log).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping

from gateway.store.scripts import Scripts
from sdk.wire import Readiness as Report

log = logging.getLogger(__name__)

OK = "ok"


class Readiness:
    """The readiness check of one gateway, its Redis part cached for ``ttl`` seconds.

    ``loops``: whether each background loop runs, by name; ``stalled``: whether a loop's last
    turn failed (it runs, but has not caught up since Redis came back), by name."""

    def __init__(
        self,
        scripts: Scripts,
        loops: Mapping[str, Callable[[], bool]],
        *,
        stalled: Mapping[str, Callable[[], bool]] | None = None,
        ttl: float = 1.0,
        timeout: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._scripts = scripts
        self._loops = loops
        self._stalled = stalled or {}
        self._ttl = ttl
        self._timeout = timeout
        self._clock = clock
        self._wall = wall
        self._last: tuple[float, Report] | None = None
        self._checking: asyncio.Future[Report] | None = None

    async def check(self) -> Report:
        """The latest report of Redis, checked again when older than ``ttl``, with the loops
        as they are now."""
        if self._last is not None and self._clock() - self._last[0] < self._ttl:
            redis = self._last[1]
        else:
            if self._checking is None:
                self._checking = asyncio.ensure_future(self._check())
                self._checking.add_done_callback(self._checked)
            # Shielded: one probe going away must not cancel the check the others wait for.
            redis = await asyncio.shield(self._checking)
        checks = {**redis.checks, "loops": self._loops_check()}
        ready = all(value == OK for value in checks.values())
        return Report(ready=ready, checks=checks, checked_at=redis.checked_at)

    def _loops_check(self) -> str:
        stopped = sorted(name for name, alive in self._loops.items() if not alive())
        stalled = sorted(name for name, stuck in self._stalled.items() if stuck())
        found = [
            f"{word}: {', '.join(names)}"
            for word, names in (("stopped", stopped), ("stalled", stalled))
            if names
        ]
        return "; ".join(found) or OK

    def _checked(self, done: asyncio.Future[Report]) -> None:
        self._checking = None
        if not done.cancelled() and done.exception() is None:
            self._last = (self._clock(), done.result())

    async def _check(self) -> Report:
        """Redis and its scripts (the loops are added by :meth:`check`)."""
        checks = {"redis": OK, "scripts": OK}
        try:
            reloaded = await asyncio.wait_for(self._scripts.ensure_loaded(), self._timeout)
            if reloaded:
                log.info(
                    "readiness: %d Lua scripts were missing from Redis and were loaded", reloaded
                )
        except TimeoutError:
            checks["redis"] = f"no answer within {self._timeout:g}s"
            checks["scripts"] = "unknown: Redis did not answer"
        except Exception as e:
            # The error's text names Redis's address: logged, not shown to unauthenticated
            # callers.
            log.warning("readiness: Redis is unreachable: %s", e)
            checks["redis"] = f"unreachable ({type(e).__name__})"
            checks["scripts"] = "unknown: Redis is unreachable"
        ready = all(value == OK for value in checks.values())
        return Report(ready=ready, checks=checks, checked_at=self._wall())
