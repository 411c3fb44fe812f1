"""The Lua scripts that make every state change atomic, and how they are called.

Each ``lua/<name>.lua`` is one state change; its header says what every ``KEYS[i]`` and
``ARGV[i]`` is. ``lua/prelude.lua`` (shared helpers) is prepended to each, and
``lua/health.lua`` (endpoint health and the circuit breaker) to those in ``WITH_HEALTH``, and
``lua/job_helpers.lua`` to the job scripts in ``WITH_JOB_HELPERS``.
Scripts run with EVALSHA and are loaded again when Redis answers NOSCRIPT (after a restart or
a failover).

redis-py's own ``Script`` objects check ``SCRIPT EXISTS`` before every pipeline, one extra round
trip on the hot path; callers that pipeline a script (the enqueue) use :meth:`Scripts.sha` and
fall back to :meth:`Scripts.call` when Redis answers NOSCRIPT. Scripts that change many tasks
take them all in one call (``finish``) rather than being pipelined one per task.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from importlib import resources
from typing import Any, Literal, get_args

from redis.asyncio import Redis
from redis.exceptions import NoScriptError

ScriptName = Literal[
    "enqueue",
    "claim",
    "accept",
    "heartbeat",
    "append_log",
    "finish",
    "cancel",
    "promote",
    "sweep",
    "delete_queue",
    "patch_queue",
    "resolve",
    "link",
    "ack_outbox",
    "resubmit",
    "clean",
    "walk",
    "settle_idempotency",
    "save_job",
    "begin_run",
    "end_run",
    "settle_run",
    "delete_run",
]
SCRIPT_NAMES: tuple[ScriptName, ...] = get_args(ScriptName)
WITH_HEALTH: frozenset[ScriptName] = frozenset({"claim", "accept", "finish"})
WITH_JOB_HELPERS: frozenset[ScriptName] = frozenset({"save_job", "begin_run", "end_run"})

Arg = str | int | float | bytes
Reply = Any


def _read(name: str) -> str:
    return (resources.files("gateway.store") / "lua" / f"{name}.lua").read_text("utf-8")


def _source(name: ScriptName) -> str:
    # The shebang (Redis 7+) makes Redis refuse a whole script up front when it is out of
    # memory, instead of failing at its first write and leaving the change half done.
    helpers = _read("prelude") + "\n"
    if name in WITH_HEALTH:
        helpers += _read("health") + "\n"
    if name in WITH_JOB_HELPERS:
        helpers += _read("job_helpers") + "\n"
    return "#!lua\n" + helpers + _read(name)


class Scripts:
    """The loaded scripts of one Redis client."""

    def __init__(self, redis: Redis) -> None:
        self._redis = redis
        self._source = {name: _source(name) for name in SCRIPT_NAMES}
        self._sha = {
            name: hashlib.sha1(src.encode(), usedforsecurity=False).hexdigest()
            for name, src in self._source.items()
        }

    def sha(self, name: ScriptName) -> str:
        """For callers that pipeline a script with other commands; they handle NOSCRIPT."""
        return self._sha[name]

    async def load(self) -> None:
        """Load every script into Redis (idempotent)."""
        for src in self._source.values():
            await self._redis.script_load(src)

    async def call(self, name: ScriptName, keys: Sequence[str], args: Sequence[Arg]) -> Reply:
        try:
            return await self._redis.evalsha(self._sha[name], len(keys), *keys, *args)
        except NoScriptError:
            await self.load()
            return await self._redis.evalsha(self._sha[name], len(keys), *keys, *args)
