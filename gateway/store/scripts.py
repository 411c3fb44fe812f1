"""The Lua scripts that make every state change atomic, and how they are called.

Each ``lua/<name>.lua`` is one state change; its header says what every ``KEYS[i]`` and
``ARGV[i]`` is. The helpers a script uses are prepended to it: those of
``lua/wait_helpers.lua`` (waits for events), ``lua/ready.lua`` (the ready set's members),
``lua/prelude.lua`` (shared helpers), ``lua/due_helpers.lua`` (a queue's reckoning) and
``lua/key_limits.lua`` (per-key concurrency), of
``lua/health.lua`` (endpoint health and the circuit breaker) for those in ``WITH_HEALTH``, and
of ``lua/job_helpers.lua`` for the job scripts in ``WITH_JOB_HELPERS``; only the ones it names,
directly or through another helper (every compiled helper stays in Lua's heap, which its
garbage collector walks as scripts run).
Scripts run with EVALSHA and are loaded again when Redis answers NOSCRIPT (after a restart or
a failover).

redis-py's own ``Script`` objects check ``SCRIPT EXISTS`` before every pipeline, one extra round
trip on the hot path; callers that pipeline a script (the enqueue) use :meth:`Scripts.sha` and
fall back to :meth:`Scripts.call` when Redis answers NOSCRIPT. Scripts that change many tasks
take them all in one call (``finish``) rather than being pipelined one per task.

The scripts that can make something of their queue due (``ANNOUNCING``) are wrapped: each
answers ``{due ms or nil, reply}`` (see ``lua/prelude.lua``), :meth:`Scripts.call` hands back
the reply alone, and when a due time came with it, lowers the queue's entry in the global due
index (``lua/lower_due.lua``). That second command runs only when the queue's earliest due time
moved earlier, and a gateway that dies between the two loses nothing for long: see
:mod:`gateway.store.tasks.due`.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
from collections.abc import Sequence
from importlib import resources
from typing import Any, Literal, cast, get_args

from redis.asyncio import Redis
from redis.exceptions import NoScriptError

from gateway.store import keys

log = logging.getLogger(__name__)

ScriptName = Literal[
    "enqueue",
    "index",
    "claim",
    "accept",
    "heartbeat",
    "step",
    "append_log",
    "finish",
    "cancel",
    "promote",
    "recover",
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
    "reckon_due",
    "lower_due",
    "settle_due",
    "put_catalog",
    "rotate_secret",
    "set_endpoint",
    "notice_claim",
    "notice_settle",
    "notify_secret",
    "rotate_notify_secret",
    "log_page",
    "overview",
    "sizes",
    "save_job",
    "begin_run",
    "end_run",
    "settle_run",
    "run_ended",
    "delete_run",
    "open_session",
    "sign_in_attempt",
    "key_rebalance",
    "missing",
    "unindex",
    "orphan_steps",
    "claim_events",
    "wait",
    "resume",
    "invoke",
    "resume_child",
    "call",
    "resume_call",
    "claim_calls",
    "reshape",
]
SCRIPT_NAMES: tuple[ScriptName, ...] = get_args(ScriptName)
WITH_HEALTH: frozenset[ScriptName] = frozenset(
    {"claim", "accept", "finish", "wait", "invoke", "call"}
)
WITH_JOB_HELPERS: frozenset[ScriptName] = frozenset({"save_job", "begin_run", "end_run"})

# The scripts that announce due times, each with the position in KEYS (from 1) of its queue's
# hash, where the queue's ``due`` field lives.
ANNOUNCING: dict[ScriptName, int] = {
    "enqueue": 1,
    "claim": 1,
    "finish": 1,
    "wait": 1,
    "invoke": 1,
    "call": 1,
    "cancel": 5,
    "resolve": 1,
}

# After a cross-queue dependency is recorded in ``links``, how long its gateway has to register
# it before the recoverer does it again (it stopped in between). Lua reads it as RELINK_AFTER_MS.
RELINK_AFTER_MS = 10_000

Arg = str | int | float | bytes
Reply = Any


def _read(name: str) -> str:
    return (resources.files("gateway.store") / "lua" / f"{name}.lua").read_text("utf-8")


_DEFINITION = re.compile(r"local (?:function )?([A-Za-z_]\w*)")
_COMMENT = re.compile(r"--[^\n]*")
_NAME = re.compile(r"[A-Za-z_]\w*")


def _definitions(source: str) -> list[tuple[str, str]]:
    """The top-level definitions of a helper file (``local function f(...)``, ``local X = ...``
    at the start of a line), each as its name and its text up to the next one."""
    lines = source.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if _DEFINITION.match(line)]
    return [
        (cast(re.Match[str], _DEFINITION.match(lines[a]))[1], "".join(lines[a:b]))
        for a, b in zip(starts, [*starts[1:], len(lines)], strict=True)
    ]


def _used(definitions: list[tuple[str, str]], body: str) -> str:
    """The definitions ``body`` uses, directly or through others, in their order. Every helper
    a script carries costs Redis on each call (Lua's garbage collector walks them all), so a
    script carries only those it needs."""
    by_name = dict(definitions)
    wanted: set[str] = set()
    pending = [body]
    while pending:
        named = set(_NAME.findall(_COMMENT.sub("", pending.pop())))
        for name in (named & by_name.keys()) - wanted:
            wanted.add(name)
            pending.append(by_name[name])
    return "".join(definition for name, definition in definitions if name in wanted)


# Scripts made of another: the line ``--@finish`` of ``wait.lua`` becomes ``finish.lua`` as the
# function ``finish_main`` (a wait is a finish with more after it; the finish itself stays one
# file, and the hot path's script gains nothing).
COMPOSED: dict[ScriptName, ScriptName] = {
    "wait": "finish",
    "invoke": "finish",
    "call": "finish",
    "recover": "promote",
}


@functools.cache
def _source(name: ScriptName, compact_records: bool = False) -> str:
    body = _read(name)
    if name in COMPOSED:
        inner = COMPOSED[name]
        body = body.replace(
            f"--@{inner}\n", f"local function {inner}_main()\n{_read(inner)}\nend\n", 1
        )
    if name in ANNOUNCING:
        # The body's top-level returns become main()'s; the due time rides along.
        body = (
            f"local function main()\n{body}\nend\n"
            f"local reply = main()\nreturn {{announce(KEYS[{ANNOUNCING[name]}]), reply}}\n"
        )
    helpers = [
        f"local RELINK_AFTER_MS = {RELINK_AFTER_MS}\n",
        f"local COMPACT_RECORDS = {'true' if compact_records else 'false'}\n",
        _read("wait_helpers"),  # first: the prelude's forget_task calls it
        _read("ready"),  # the prelude's make_ready and release use it
        _read("prelude"),
        _read("due_helpers"),  # it uses the prelude's due_at
        _read("key_limits"),
        _read("resume_helpers"),  # last: it uses key_limits.lua and the prelude
    ]
    if name in WITH_HEALTH:
        helpers.append(_read("health"))
    if name in WITH_JOB_HELPERS:
        helpers.append(_read("job_helpers"))
    definitions = [d for text in helpers for d in _definitions(text)]
    # The shebang (Redis 7+) makes Redis refuse a whole script up front when it is out of
    # memory, instead of failing at its first write and leaving the change half done.
    return "#!lua\n" + _used(definitions, body) + "\n" + body


class Scripts:
    """The loaded scripts of one Redis client. ``compact_records``: store a plain queued
    task's record as text (``plain_record`` in ``lua/prelude.lua``), which gateways before
    it cannot read; records of both forms are read either way."""

    def __init__(self, redis: Redis, *, compact_records: bool = False) -> None:
        self._redis = redis
        self._source = {name: _source(name, compact_records) for name in SCRIPT_NAMES}
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

    async def ensure_loaded(self) -> int:
        """Load the scripts Redis lacks (it restarted without persistence, failed over, or ran
        SCRIPT FLUSH); returns how many it lacked. One SCRIPT EXISTS when it lacks none."""
        exists = await self._redis.script_exists(*self._sha.values())
        missing = [name for name, found in zip(self._sha, exists, strict=True) if not found]
        for name in missing:
            await self._redis.script_load(self._source[name])
        return len(missing)

    async def call(
        self, name: ScriptName, script_keys: Sequence[str], args: Sequence[Arg]
    ) -> Reply:
        sha, n = self._sha[name], len(script_keys)
        try:
            reply = await self._redis.evalsha(sha, n, *script_keys, *args)
        except NoScriptError:
            await self.load()
            reply = await self._redis.evalsha(sha, n, *script_keys, *args)
        return await self.unwrap(name, script_keys, reply)

    async def unwrap(self, name: ScriptName, script_keys: Sequence[str], reply: Reply) -> Reply:
        """The reply of a script as its header describes it. For an announcing script, lower
        the queue's entry in the due index first when the script announced an earlier time.

        Callers that pipeline a script call this on its raw reply themselves."""
        if name not in ANNOUNCING:
            return reply
        due, reply = reply
        if due is not None:
            await self.lower_due(keys.queue_of(script_keys[ANNOUNCING[name] - 1]), int(due))
        return reply

    async def lower_due(self, queue: str, due_ms: int) -> None:
        """Lower ``queue``'s entry in the due index to ``due_ms`` (or add it).

        A failure is logged, not raised: the state change it follows is done, and the queue's
        due time is only late until the recoverer's next rescan, exactly as when the gateway
        dies between the two commands."""
        try:
            await self.call("lower_due", [keys.DUE], [queue, due_ms, keys.DUE_CHANNEL])
        except Exception:
            log.warning("could not update the due index for queue %r", queue, exc_info=True)
