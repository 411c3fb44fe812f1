"""Loaded into each gateway process by ``bench/probes/twoproc.py`` (never by the gateway itself):
counts what the dispatcher's claims and finishes carried, and writes the counts as JSON to
``$TWOPROC_COUNTS/<pid>.json`` whenever the process gets SIGUSR1 (the probe reads it before and
after a drain).

- loop claims (``Dispatcher.claim``): calls, tasks leased, and the calls that leased nothing;
- carried claims (``Dispatcher.take``: a claim that rode in an enqueue's or a finish's round
  trip): calls and tasks leased;
- finishes (``Dispatcher._finish_many``): calls and ends written.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
from pathlib import Path
from typing import Any

from gateway.dispatch.dispatcher import Dispatcher
from gateway.store.tasks.finish import Finishing
from gateway.store.tasks.finish_reply import Ended

COUNTS: dict[str, int] = {
    "claims": 0,
    "claimed": 0,
    "claims_empty": 0,
    "carried": 0,
    "carried_tasks": 0,
    "finishes": 0,
    "ends": 0,
}

_claim = Dispatcher.claim
_take = Dispatcher.take
_finish_many = Dispatcher._finish_many


async def claim(self: Dispatcher, queue: str) -> Any:
    found = await _claim(self, queue)
    COUNTS["claims"] += 1
    COUNTS["claimed"] += len(found.leases)
    COUNTS["claims_empty"] += not found.leases
    return found


def take(self: Dispatcher, queue: str, found: Any) -> None:
    if found is not None:
        COUNTS["carried"] += 1
        COUNTS["carried_tasks"] += len(found.leases)
    _take(self, queue, found)


async def finish_many(self: Dispatcher, queue: str, finishes: list[Any]) -> Any:
    COUNTS["finishes"] += 1
    COUNTS["ends"] += len(finishes)
    return await _finish_many(self, queue, finishes)


_signal = Dispatcher._signal


def signal_only(self: Dispatcher, queue: str, *, change: bool) -> None:
    """With ``$TWOPROC_ONLY`` set, this gateway dispatches that queue alone (the experiment of
    a perfect split: each gateway alone with its own queue)."""
    only = os.environ.get("TWOPROC_ONLY")
    if not only or only == queue:
        _signal(self, queue, change=change)


_finish_batch = Finishing.finish_batch


async def finish_batch(self: Finishing, *args: Any, **kwargs: Any) -> Ended:
    """With ``$TWOPROC_ONLY`` set, no other gateway dispatches the queue: its finishes act as
    the queue's only dispatcher's do (they carry the next claim), whoever else subscribes."""
    ended = await _finish_batch(self, *args, **kwargs)
    if os.environ.get("TWOPROC_ONLY"):
        return dataclasses.replace(ended, alone=ended.ready, shared=False)
    return ended


def _write(*_: object) -> None:
    folder = os.environ.get("TWOPROC_COUNTS")
    if folder:
        written = Path(folder) / f"{os.getpid()}.json.tmp"
        written.write_text(json.dumps(COUNTS))
        written.rename(written.with_suffix(""))


Dispatcher.claim = claim  # type: ignore[method-assign]
Dispatcher.take = take  # type: ignore[method-assign]
Dispatcher._finish_many = finish_many  # type: ignore[method-assign]
Dispatcher._signal = signal_only  # type: ignore[method-assign]
Finishing.finish_batch = finish_batch  # type: ignore[method-assign]
signal.signal(signal.SIGUSR1, _write)
