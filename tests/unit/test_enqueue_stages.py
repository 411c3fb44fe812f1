"""The enqueue's stages that need no Redis, each on its own (gateway.services.enqueue), and the
markers of a finish's reply (gateway.store.tasks.finish_reply)."""

from __future__ import annotations

import pytest

from gateway.core.errors import DuplicateTaskId, FieldProblem
from gateway.services.enqueue.after_store import cross_links, ready_count, stored_names
from gateway.services.enqueue.keys import key_problems
from gateway.services.enqueue.options import given_ids
from gateway.store.records import NewTask
from gateway.store.tasks import Stored
from gateway.store.tasks.enqueue_reply import Replaced
from gateway.store.tasks.finish_reply import read_markers
from sdk.wire import KeyConcurrency, QueuePolicy, TaskCreate, TaskState

A, B = "01KAQ30000000000000000000A", "01KAQ30000000000000000000B"


def test_ids_given_are_indexed_and_a_repeat_is_refused() -> None:
    made = [TaskCreate(name="n", id=A), TaskCreate(name="n"), TaskCreate(name="n", id=B)]
    assert given_ids(made) == {A: 0, B: 2}
    assert given_ids([TaskCreate(name="n")]) == {}
    assert given_ids([TaskCreate(name="n", id=A), TaskCreate(name="n", id=B)]) == {A: 0, B: 1}
    with pytest.raises(DuplicateTaskId, match=r"tasks\.2\.id repeats tasks\.0\.id"):
        given_ids([TaskCreate(name="n", id=A), TaskCreate(name="n"), TaskCreate(name="n", id=A)])


def test_a_concurrency_key_needs_the_queues_key_concurrency() -> None:
    specs = [TaskCreate(name="n"), TaskCreate(name="n", concurrency_key="k")]
    assert key_problems(specs, QueuePolicy()) == [
        FieldProblem("tasks.1.concurrency_key", "the queue has no key_concurrency")
    ]
    assert key_problems(specs, QueuePolicy(key_concurrency=KeyConcurrency(limit=1))) == []


def test_what_follows_the_store_reads_each_tasks_outcome() -> None:
    linked = NewTask(A, "a", "null", 0, 1, 1, cross_deps=(("other", B),))
    matched = NewTask(B, "b", "null", 0, 1, 1, cross_deps=(("other", A),))
    plain = NewTask("01KAQ30000000000000000000C", "c", "null", 0, 1, 1)
    new = [linked, matched, plain]
    pending = Replaced("01KAQ30000000000000000000D", 2, 1, 1, TaskState.QUEUED)
    stored = [Stored(TaskState.WAITING), Stored(None, A), Stored(None, replaced=pending)]
    assert list(stored_names(new, stored)) == ["a"]
    assert cross_links(new, stored) == [(A, "other", B)]
    assert ready_count(stored) == 1
    assert ready_count([Stored(TaskState.QUEUED), Stored(TaskState.SCHEDULED)]) == 1


def test_a_finish_replys_markers_are_taken_off_its_ends() -> None:
    ends = [["OK"], ["STALE", "queued"]]
    replies = [*ends, ["READY", 3], ["NOTICE"]]
    assert read_markers(replies, 2) == (True, 3, True)
    assert replies == ends
    assert read_markers(list(ends), 2) == (False, 0, False)
