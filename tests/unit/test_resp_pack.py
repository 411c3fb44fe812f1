"""The coalescer packs commands itself: byte for byte what redis-py would send."""

from __future__ import annotations

from redis.asyncio.connection import Connection

from gateway.store.coalescing import Command, Packed, pack, unpacked

KEYS = Packed.of(["jg:{q}:queue", "jg:{q}:meta", "jg:{ünï}:ready"])
COMMANDS: list[Command] = [
    ("SET", "jg:idx:01KB", "q", "PX", 63072000000),
    ("EVALSHA", "a" * 40, 3, KEYS, -5, 0, 1.5, "", b"\x00\r\n", '{"n": "é"}'),
    ("PING",),
]


def test_packed_as_redis_py_packs_the_same_words() -> None:
    words = [unpacked(command) for command in COMMANDS]
    assert words[1][3:6] == ["jg:{q}:queue", "jg:{q}:meta", "jg:{ünï}:ready"]
    assert pack(COMMANDS) == b"".join(Connection().pack_commands(words))
