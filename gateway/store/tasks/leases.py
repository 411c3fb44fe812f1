"""Leases: claiming ready tasks for a push or a pull, heartbeats and log lines fenced by the
lease token."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

import orjson
from redis.asyncio import Redis

from gateway.store.keys import QueueKeys
from gateway.store.passed_results import fetch_results
from gateway.store.records import Lease, load_record
from gateway.store.scripts import Arg, Reply
from gateway.store.tasks.base import StoreBase
from sdk.wire import TaskState

LOG_LINES_KEPT = 10_000  # the default of the log_lines_kept setting


class ClaimStatus(StrEnum):
    OK = "OK"
    NOQUEUE = "NOQUEUE"
    PAUSED = "PAUSED"
    FULL = "FULL"
    EMPTY = "EMPTY"
    NOENDPOINT = "NOENDPOINT"
    RATE = "RATE"


@dataclass(frozen=True, slots=True)
class Claim:
    status: ClaimStatus
    leases: list[Lease]
    retry_at_ms: int | None = None  # RATE, or NOENDPOINT with an open circuit: when to try again
    held: bool = False  # RATE from per-name or per-key limits: new work may go before retry_at
    # OK, and no ready task is left that an endpoint with room can take: claiming again before
    # something changes (an enqueue, an attempt's end, a policy change) would find nothing.
    settled: bool = False


def claim_keys(k: QueueKeys) -> list[str]:
    """The claim script's KEYS (``lua/claim.lua``)."""
    return [
        k.policy,
        k.meta,
        k.payload,
        k.checkpoint,
        k.running,
        k.endpoints,
        k.inflight,
        k.ready,
        k.singleton,
        k.stalls,
        k.health,
        k.rates,
        k.rates_full,
        k.steps,
    ]


def claim_args(count: int, seed: str, now_ms: int, endpoint_id: str | None = None) -> list[Arg]:
    """The claim script's ARGV: for the push dispatcher without ``endpoint_id``."""
    return [now_ms, count, seed, endpoint_id or ""]


def read_claim(queue: str, reply: Reply, now_ms: int) -> Claim:
    """The claim script's (unwrapped) reply as a :class:`Claim`."""
    status = ClaimStatus(reply[0])
    if status is ClaimStatus.RATE:
        return Claim(status, [], now_ms + int(reply[1]), held=len(reply) > 2)
    if status is ClaimStatus.NOENDPOINT:
        return Claim(status, [], int(reply[1]) if reply[1] else None)
    if status is not ClaimStatus.OK:
        return Claim(status, [])
    leases = []
    for row in reply[2:]:  # id, endpoint, record, payload, checkpoint, secrets[, steps]
        # The record as load_record reads it, its defaults (fields the scripts leave out when
        # at their default) given here by each get.
        record = orjson.loads(row[2])
        get = record.get
        started = get("started")
        payload = row[3]
        # Positional, in the fields' order (test_read_claim.py holds it to a lease made by
        # keywords): 19 keywords took 3.7-4.0 µs per lease against 1.9-3.1 (timeit).
        leases.append(
            Lease(
                queue,
                row[0],  # task_id
                row[1],  # endpoint_id
                record["lease"],  # token
                record["name"],
                get("att", 0),  # attempt
                get("max_att"),  # max_attempts
                "null" if payload is None else payload,  # payload_json
                row[4],  # checkpoint_json
                int(record["exp"]),  # expires_ms
                int(record["deadline"]),  # deadline_ms
                get("tp"),  # traceparent
                get("ts"),  # tracestate
                int(max(get("run_at", 0), get("created", 0))),  # ready_ms
                int(get("first", 0) if started is None else started),  # started_ms
                row[6] if len(row) > 6 else None,  # steps_json
                get("ver") or "",  # version
                tuple(row[5].split()),  # secrets
                # pass_results: rare, so the common claim pays one lookup
                tuple((q, i) for q, i in record["rs"]) if "rs" in record else (),  # results_from
            )
        )
    return Claim(status, leases, settled=reply[1] == "1")


async def with_results(redis: Redis, claim: Claim) -> Claim:
    """``claim``, its leases of tasks with ``pass_results`` carrying their dependencies'
    results (gateway.store.passed_results); the same claim when none asks (no round trip)."""
    asking = [lease for lease in claim.leases if lease.results_from]
    if not asking:
        return claim
    fetched = iter(await fetch_results(redis, [x.results_from for x in asking]))
    leases = [
        replace(lease, results_json=next(fetched)) if lease.results_from else lease
        for lease in claim.leases
    ]
    return replace(claim, leases=leases)


class Fence(StrEnum):
    """How a lease-fenced change went."""

    OK = "OK"
    NOTASK = "NOTASK"  # no such task
    NOQUEUE = "NOQUEUE"  # the queue is not registered: nothing changed
    STALE = "STALE"  # the token is not the current lease: nothing changed
    ALIVE = "ALIVE"  # an expiry found the lease extended meanwhile: nothing changed


@dataclass(frozen=True, slots=True)
class Heartbeat:
    fence: Fence
    cancel_requested: bool = False
    expires_ms: int = 0
    state: TaskState | None = None


@dataclass(frozen=True, slots=True)
class StepRecorded:
    """How recording a durable step went: ``recorded`` False when the name was recorded before
    (by ``attempt``); ``size`` is what the steps would have taken when refused as too big;
    ``cancel_requested`` as a heartbeat's answer says it."""

    fence: Fence
    recorded: bool = False
    attempt: int = 0
    state: TaskState | None = None
    size: int = 0
    cancel_requested: bool = False


class Leasing(StoreBase):
    """Claims tasks under a lease, and keeps leases alive."""

    async def claim(
        self, queue: str, count: int, seed: str, now_ms: int, *, endpoint_id: str | None = None
    ) -> Claim:
        """Lease up to ``count`` ready tasks; ``seed`` (secret, random, fresh for every call)
        is what the script derives their lease tokens from. Without ``endpoint_id`` (the push
        dispatcher) to push endpoints only; with it, to that pull endpoint only."""
        script_keys = claim_keys(QueueKeys.of(queue))
        reply = await self._scripts.call(
            "claim", script_keys, claim_args(count, seed, now_ms, endpoint_id)
        )
        return await with_results(self._redis, read_claim(queue, reply, now_ms))

    async def accept_many(
        self, queue: str, accepted: Sequence[tuple[str, str]], now_ms: int
    ) -> list[Fence]:
        """Record that the endpoints answered these pushes 202 (task id, lease token): their
        leases running out now counts against the endpoint. Each is fenced by its token."""
        if not accepted:
            return []
        k = QueueKeys.of(queue)
        args: list[str | int] = [now_ms]
        for task_id, token in accepted:
            args += [task_id, token]
        replies = await self._scripts.call("accept", [k.meta, k.endpoints, k.health], args)
        return [Fence(reply[0]) for reply in replies]

    async def lease_expiries(
        self, queue: str, leases: Sequence[tuple[str, str]]
    ) -> list[int | None]:
        """The current expiry of each lease (task id, token), heartbeats included; None for a
        lease that is no longer the task's (it ended, or the task was pushed again)."""
        k = QueueKeys.of(queue)
        raws = await self._redis.hmget(k.meta, [task_id for task_id, _ in leases])
        found: list[int | None] = []
        for (_, token), raw in zip(leases, raws, strict=True):
            record = None if raw is None else load_record(raw)
            current = record is not None and record.get("lease") == token
            found.append(int(record["exp"]) if current and record is not None else None)
        return found

    async def heartbeat(
        self,
        queue: str,
        task_id: str,
        token: str,
        now_ms: int,
        *,
        extend_ms: int | None = None,
        progress: float | None = None,
        checkpoint_json: str | None = None,
    ) -> Heartbeat:
        k = QueueKeys.of(queue)
        reply = await self._scripts.call(
            "heartbeat",
            [k.policy, k.meta, k.running, k.checkpoint, k.stalls],
            [
                task_id,
                token,
                now_ms,
                "" if extend_ms is None else extend_ms,
                "" if progress is None else repr(progress),
                "" if checkpoint_json is None else checkpoint_json,
            ],
        )
        fence = Fence(reply[0])
        if fence is Fence.OK:
            return Heartbeat(fence, bool(reply[1]), int(reply[2]))
        if fence is Fence.STALE:
            return Heartbeat(fence, state=TaskState(reply[1]))
        return Heartbeat(fence)

    async def step(
        self,
        queue: str,
        task_id: str,
        token: str,
        now_ms: int,
        name: str,
        result_json: str,
        max_bytes: int,
    ) -> StepRecorded:
        """Record a durable step of the running attempt (fenced by ``token``); a name recorded
        before keeps its first result; refused (``size`` set) past ``max_bytes`` in all. When
        replicas must confirm writes (``wait_replicas``), it is answered only once they hold
        it, as an enqueue: "recorded" must survive a failover, or a task whose attempt goes
        on against the promoted replica ends without the steps it recorded (raises
        NotReplicated otherwise)."""
        k = QueueKeys.of(queue)
        reply = await self.call_confirmed(
            "step",
            [k.policy, k.meta, k.steps],
            [task_id, token, now_ms, name, result_json, max_bytes],
            "the step may or may not be kept: send it again (a name recorded keeps its first "
            "result), or end the attempt with an error",
        )
        if reply[0] == "TOOBIG":
            return StepRecorded(Fence.OK, size=int(reply[1]))
        fence = Fence(reply[0])
        if fence is Fence.OK:
            return StepRecorded(
                fence,
                recorded=bool(int(reply[1])),
                attempt=int(reply[2]),
                cancel_requested=bool(int(reply[3])),
            )
        if fence is Fence.STALE:
            return StepRecorded(fence, state=TaskState(reply[1]))
        return StepRecorded(fence)

    async def append_log(
        self,
        queue: str,
        task_id: str,
        token: str,
        lines: Sequence[str],
        keep: int = LOG_LINES_KEPT,
    ) -> Fence:
        """Append log lines, keeping the last ``keep`` (the dropped ones are counted in the
        record); the log expires with the task (the queue's retention, read by the script)."""
        k = QueueKeys.of(queue)
        reply = await self._scripts.call(
            "append_log",
            [k.policy, k.meta, k.log(task_id)],
            [task_id, token, keep, *lines],
        )
        return Fence(reply[0])
