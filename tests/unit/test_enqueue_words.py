"""The enqueue's script arguments, packed in RESP by gateway.store.tasks.enqueue itself, are
the very bytes gateway.store.coalescing.pack writes for the same words one at a time."""

from __future__ import annotations

from gateway.store import keys
from gateway.store.coalescing import pack, unpacked
from gateway.store.records import NewTask
from gateway.store.tasks.enqueue_words import index_words as _index_words
from gateway.store.tasks.enqueue_words import task_words as _task_words

TASKS = [
    NewTask(
        id="01KAQ30000000000000000000A",
        name="a",
        payload_json="null",
        priority=0,
        created_ms=1,
        run_at_ms=1,
    ),
    NewTask(
        id="01KAQ30000000000000000000B",
        name="b.c",
        payload_json='{"s":"ü€😀\\r\\n"}',
        priority=-3,
        created_ms=1,
        run_at_ms=9,
        owner="tenant-ü",
        dedup_key="k",
    ),
    NewTask(
        id="client-chosen-id",
        name="d",
        payload_json="[" + "1," * 5000 + "1]",
        priority=7,
        created_ms=2,
        run_at_ms=2,
        depends_on=("01KAQ30000000000000000000A",),
    ),
]


def test_the_task_words_are_what_pack_writes_word_by_word() -> None:
    words = [w for t in TASKS for w in (t.id, t.record_json(), t.payload_json)]
    packed = _task_words(TASKS)
    assert list(packed.words) == words
    assert pack([("EVALSHA", "sha", 0, 1, packed, "origin")]) == pack(
        [("EVALSHA", "sha", 0, 1, *words, "origin")]
    )
    assert unpacked(("EVALSHA", packed)) == ["EVALSHA", *words]


def test_the_index_words_are_what_pack_writes_word_by_word() -> None:
    index = [(keys.task_index(t.id), t.id) for t in TASKS]
    words = [*(b for b, _ in index), "qü", *(i for _, i in index)]
    packed = _index_words(index, "qü")
    assert list(packed.words) == words
    assert pack([("EVALSHA", "sha", len(index), packed)]) == pack(
        [("EVALSHA", "sha", len(index), *words)]
    )


def test_no_task_packs_to_nothing() -> None:
    assert _task_words([]).resp == b""
    assert pack([("X", _task_words([]), "y")]) == pack([("X", "y")])
