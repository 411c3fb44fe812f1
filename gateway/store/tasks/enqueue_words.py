"""The enqueue script's words (``lua/enqueue.lua``'s KEYS and ARGV) and the index script's,
packed in RESP here: the first step of :meth:`gateway.store.tasks.enqueue.Enqueuing.enqueue_batch`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from gateway.store.coalescing import Packed
from gateway.store.index import Entry
from gateway.store.keys import QueueKeys
from gateway.store.records import NewTask


@functools.lru_cache(maxsize=4096)
def enqueue_keys(queue: str) -> Packed:
    """The enqueue script's keys for ``queue`` (KEYS[1..19]), packed once."""
    k = QueueKeys.of(queue)
    return Packed.of(
        (
            k.policy,
            k.meta,
            k.payload,
            k.ready,
            k.scheduled,
            k.seq,
            k.waiting,
            k.dependents,
            k.groups,
            k.outbox,
            k.failed,
            k.dead,
            k.dedup,
            k.dedup_exp,
            k.singleton,
            k.capabilities,
            k.links,
            k.notify,
            k.key_counts,
        )
    )


def keys_of(queue: str, tasks: Sequence[NewTask]) -> Packed:
    """The enqueue script's keys: the queue's, then one per task with a debounce or throttle
    option (KEYS[20..]), then the waits index's two when a task has cancel_on."""
    flows = [flow_key(queue, t) for t in tasks if t.debounce is not None or t.throttle is not None]
    packed = enqueue_keys(queue)
    if any(t.cancel_on for t in tasks):
        k = QueueKeys.of(queue)
        flows += (k.waits, k.wait_shapes)
    if flows:
        packed = Packed.of((*packed.words, *flows))
    return packed


def flow_key(queue: str, t: NewTask) -> str:
    """The key of a task's debounce or throttle option (lua/enqueue.lua, KEYS[20..])."""
    k = QueueKeys.of(queue)
    if t.debounce is not None:
        return k.debounce(t.name, t.debounce[0])
    assert t.throttle is not None
    return k.throttle(t.name, t.throttle[0])


def task_words(tasks: Sequence[NewTask]) -> Packed:
    """The enqueue script's three arguments per task (id, record JSON, payload JSON), packed
    in RESP here at one format per task: :func:`gateway.store.coalescing.pack` takes a word
    at a time (a type test, an encode, a format each), about 2 µs per task of a batch."""
    words: list[str] = []
    resp: list[bytes] = []
    for t in tasks:
        record = t.record_json()
        words += (t.id, record, t.payload_json)
        i, r, p = t.id.encode(), record.encode(), t.payload_json.encode()
        resp.append(b"$%d\r\n%b\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n" % (len(i), i, len(r), r, len(p), p))
    return Packed(tuple(words), b"".join(resp))


def index_words(index: list[Entry], queue: str) -> Packed:
    """The index script's keys (every task's bucket) and arguments (the queue, every id),
    packed in RESP at one format per task (as :func:`task_words`)."""
    buckets = [bucket for bucket, _ in index]
    ids = [task_id for _, task_id in index]
    q = queue.encode()
    resp = [b"$%d\r\n%b\r\n" % (len(b), b) for b in map(str.encode, buckets)]
    resp.append(b"$%d\r\n%b\r\n" % (len(q), q))
    resp += [b"$%d\r\n%b\r\n" % (len(i), i) for i in map(str.encode, ids)]
    return Packed((*buckets, queue, *ids), b"".join(resp))
