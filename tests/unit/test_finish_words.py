"""A finish's script arguments, packed in RESP by gateway.store.tasks.finish itself, are the
very bytes gateway.store.coalescing.pack writes for the same words one at a time, and the words
are the nine lua/finish.lua reads per end (what redis-py sends when the finish goes alone)."""

from __future__ import annotations

from gateway.store.coalescing import pack, unpacked
from gateway.store.keys import QueueKeys
from gateway.store.tasks.finish_words import Finish
from gateway.store.tasks.finish_words import finish_keys as _finish_keys
from gateway.store.tasks.finish_words import finish_words as _finish_words
from sdk.wire import AttemptOutcome, FailureKind

ENDS = [
    (
        Finish("01KAQ30000000000000000000A", "tok-a", AttemptOutcome.SUCCEEDED, 200),
        ["01KAQ30000000000000000000A", "tok-a", "succeeded", "200", "", "", "0", "", ""],
    ),
    (
        Finish(
            "client-chosen-ü",
            "tok-b",
            AttemptOutcome.SUCCEEDED,
            201,
            '{"s":"ü€😀\\r\\n"}',
            "a traceback is not sent for a success",
            warning="slow ü",
        ),
        [
            "client-chosen-ü",
            "tok-b",
            "succeeded",
            "201",
            '{"s":"ü€😀\\r\\n"}',
            "slow ü",
            "0",
            "",
            "",
        ],
    ),
    (
        Finish(
            "01KAQ30000000000000000000C",
            "tok-c",
            AttemptOutcome.FAILED,
            None,
            "boom\r\n" * 300,
            "Traceback ü",
            12_345,
            warning="not sent for a failure",
            failure=FailureKind.CONNECTION,
            task_failure=True,
        ),
        [
            "01KAQ30000000000000000000C",
            "tok-c",
            "failed",
            "",
            "boom\r\n" * 300,
            "Traceback ü",
            "12345",
            "connection",
            "1",
        ],
    ),
]


def test_the_finish_words_are_what_pack_writes_word_by_word() -> None:
    words = [w for _, end in ENDS for w in end]
    packed = _finish_words([f for f, _ in ENDS])
    assert list(packed.words) == words
    assert pack([("EVALSHA", "sha", 0, 1, packed, "x")]) == pack(
        [("EVALSHA", "sha", 0, 1, *words, "x")]
    )
    assert unpacked(("EVALSHA", packed)) == ["EVALSHA", *words]


def test_the_finish_keys_are_the_queues() -> None:
    k = QueueKeys.of("qü")
    script_keys = _finish_keys("qü")
    assert len(script_keys.words) == 22
    assert script_keys.words[:3] == (k.policy, k.meta, k.result)
    assert script_keys.words[-2:] == (k.notify, k.key_counts)
    assert pack([("X", script_keys, "y")]) == pack([("X", *script_keys.words, "y")])


def test_no_end_packs_to_nothing() -> None:
    assert _finish_words([]).resp == b""
