"""Micro-benchmark of the per-task Python work of the batched drain, step by step, on replies
captured from a real Redis: the gateway reading a claim of 32 into leases, building and signing
the push body, reading the worker's ``BatchAnswer`` and judging each result, building the
finish's ends and packing its command, reading the finish's replies; the SDK worker reading
the ``PushBatch`` and writing its ``BatchAnswer``.

Prints µs of CPU per task for each step (median of 5 samples). Compare two trees in one sitting,
alternating: ``PYTHONPATH=<tree> .venv/bin/python -m bench.probes.drain_micro``.
"""

from __future__ import annotations

import asyncio
import base64
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from redis.asyncio import Redis
from ulid import ULID

from bench.probes import mypyc_micro
from gateway.dispatch.pusher import Pusher, batch_body
from gateway.dispatch.verdict import Answer, batch_answers, judge
from gateway.serving.redis_server import ManagedRedis
from gateway.store import coalescing, keys
from gateway.store.endpoint_records import EndpointRecord
from gateway.store.keys import QueueKeys
from gateway.store.queues import QueueStore
from gateway.store.records import NewTask
from gateway.store.scripts import Scripts
from gateway.store.tasks import Finish, TaskStore
from gateway.store.tasks.finish_reply import read_finished as _finished
from gateway.store.tasks.finish_words import finish_keys as _finish_keys
from gateway.store.tasks.leases import claim_args, claim_keys, read_claim
from sdk.outcomes import Outcome, success
from sdk.pushes import Push, read_push
from sdk.wire import HEADER_BATCH, AttemptOutcome, BatchAnswer, QueuePolicy

SIZE = mypyc_micro.SIZE  # one batch, as mypyc_micro.per_task counts per task
SECRET = "whsec_" + base64.b64encode(os.urandom(24)).decode()


async def capture(url: str) -> tuple[Any, Any, int]:
    """A claim script's reply leasing SIZE tasks, and the finish script's reply ending them."""
    redis = Redis.from_url(url, decode_responses=True)
    await redis.flushall()
    scripts = Scripts(redis)
    await scripts.load()
    store, queues = TaskStore(redis, scripts), QueueStore(redis, scripts)
    now = int(time.time() * 1000)
    await queues.put("q", QueuePolicy(paused=False, max_concurrency=10_000), now)
    endpoint = EndpointRecord(
        id="ep0",
        queue="q",
        url="http://127.0.0.1:9/",
        concurrency=SIZE,
        capabilities=[],
        secrets=[SECRET],
        created_ms=now,
        batch_size=SIZE,
    )
    await queues.add_endpoint(endpoint)
    tasks = [
        NewTask(
            id=str(ULID()),
            name="t",
            payload_json='{"args":[1,"two"],"kwargs":{}}',
            priority=0,
            created_ms=now,
            run_at_ms=now,
        )
        for _ in range(SIZE)
    ]
    await store.enqueue("q", tasks, now)
    claimed = await scripts.call(
        "claim", claim_keys(QueueKeys.of("q")), claim_args(SIZE, "seed", now)
    )
    claim = read_claim("q", claimed, now)
    ends = [Finish(x.task_id, x.token, AttemptOutcome.SUCCEEDED, 200) for x in claim.leases]
    words = coalescing.unpacked(finish_command(scripts.sha("finish"), now, "q", ends))
    count = int(words[2])
    script_keys = [str(word) for word in words[3 : 3 + count]]
    finished = await scripts.call("finish", script_keys, words[3 + count :])
    await redis.aclose()
    return claimed, finished[:SIZE], now


def finish_command(sha: str, now: int, wake: str, ends: list[Finish]) -> coalescing.Command:
    """The finish script's call as this tree packs it (before ``gwbatch2``: each end's
    arguments a list of words, packed by ``coalescing.pack``)."""
    head = (now, keys.DONE_CHANNEL_PREFIX, "q", keys.WAKE_CHANNEL, wake)
    try:
        from gateway.store.tasks.finish_words import finish_words as _finish_words
    except ImportError:
        from gateway.store.tasks.finish import _finish_args  # type: ignore[attr-defined]

        args: list[Any] = list(head)
        for f in ends:
            args += _finish_args(f)
        script_keys = _finish_keys(QueueKeys.of("q"))  # type: ignore[arg-type]
        return ("EVALSHA", sha, len(script_keys), *script_keys, *args)
    packed_keys = _finish_keys("q")
    return ("EVALSHA", sha, len(packed_keys.words), packed_keys, *head, _finish_words(ends))


def per_task(work: Callable[[], object], rounds: int = 1000) -> float:
    return mypyc_micro.per_task(work, rounds)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, ManagedRedis(Path(tmp)) as managed:
        claimed, finished, now = asyncio.run(capture(managed.url))
    leases = read_claim("q", claimed, now).leases
    pusher = Pusher(None, "http://127.0.0.1:8080")  # type: ignore[arg-type]
    ids = [lease.task_id for lease in leases]
    results = [{"id": i, "status": 200, "result": None} for i in ids]
    # As the SDK worker writes it: every field of each result.
    written = BatchAnswer.model_validate({"results": results}).model_dump_json()
    answer = Answer(200, written.encode(), "application/json")
    verdicts = [judge(a) for a in batch_answers(answer, ids)]

    def body() -> None:
        content = batch_body(leases, "http://127.0.0.1:8080").encode()
        pusher.signed("batch_x", leases[0].secrets, content)

    def ends() -> list[Finish]:
        return [
            Finish(
                lease.task_id,
                lease.token,
                v.outcome,  # type: ignore[arg-type]
                v.http_status,
                v.text,
                v.traceback,
                0,
                warning=v.warning,
                failure=v.failure,
                task_failure=v.task_failure,
            )
            for lease, v in zip(leases, verdicts, strict=True)
        ]

    def packed() -> bytes:
        return coalescing.pack([finish_command("0" * 40, now, "q  g", ends())])

    pushed = batch_body(leases, "http://127.0.0.1:8080").encode()
    headers = {HEADER_BATCH: str(SIZE)}
    push = read_push(pushed, headers)
    assert isinstance(push, Push)
    outcomes: list[Outcome] = [success(None) for _ in range(SIZE)]
    steps = {
        "gateway: read_claim": lambda: read_claim("q", claimed, now),
        "gateway: batch_body + sign": body,
        "gateway: batch_answers + judge": lambda: [judge(a) for a in batch_answers(answer, ids)],
        "gateway: finish ends + args + pack": packed,
        "gateway: finish replies read": lambda: [_finished(r) for r in finished],
        "worker: read_push": lambda: read_push(pushed, headers),
        "worker: Push.answer": lambda: push.answer(outcomes),
    }
    total = {"gateway": 0.0, "worker": 0.0}
    for name, work in steps.items():
        us = per_task(work)
        total[name.split(":")[0]] += us
        print(f"{name:40} {us:6.2f} µs/task")
    for role, us in total.items():
        print(f"{role + ' in all':40} {us:6.2f} µs/task")


if __name__ == "__main__":
    main()
