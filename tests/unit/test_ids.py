"""Task ids made a batch at a time are the ULIDs python-ulid would make: same text, same rules."""

from __future__ import annotations

from ulid import ULID

from gateway.core.ids import IdMaker, encode


def test_ids_are_ulids_of_the_clock_counting_up_within_a_millisecond() -> None:
    ms = 1_763_887_000_123
    maker = IdMaker(clock=lambda: ms, randomness=lambda n: (1020).to_bytes(n, "big"))
    first = maker.take(3)
    then = maker.take(2000)  # the same millisecond: goes on counting, across 10-bit blocks
    values = [int(ULID.from_str(i)) for i in first + then]
    assert values == list(range(values[0], values[0] + 2003))
    assert values[0] == (ms << 80) | 1020
    assert all(str(ULID.from_str(i)) == i for i in first + then)
    assert all(ULID.from_str(i).milliseconds == ms for i in first + then)


def test_a_new_millisecond_starts_at_fresh_randomness() -> None:
    now = [5]
    maker = IdMaker(clock=lambda: now[0], randomness=lambda n: b"\x07" * n)
    (one,) = maker.take(1)
    now[0] = 6
    two = maker.one()
    assert int(ULID.from_str(two)) == (6 << 80) | int.from_bytes(b"\x07" * 10, "big")
    assert one < two


def test_no_room_left_in_a_millisecond_goes_on_in_the_next() -> None:
    maker = IdMaker(clock=lambda: 9, randomness=lambda n: b"\xff" * n)
    made = maker.take(5)
    assert int(ULID.from_str(made[-1])) == (9 << 80) | (1 << 80) - 1
    more = maker.take(5)
    assert made + more == sorted(made + more)
    assert ULID.from_str(more[0]).milliseconds == 10


def test_encode_is_ulids_text() -> None:
    for value in (0, 1, (1 << 128) - 1, 0x0123456789ABCDEF0123456789ABCDEF):
        assert encode(value) == str(ULID.from_int(value))
