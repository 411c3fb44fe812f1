"""Laying out a task function's call: producer arguments plus ``ctx`` wherever it is declared."""

from __future__ import annotations

from typing import Any

import pytest

from sdk.binding import Signature

CTX = object()


def first(ctx: Any, a: int, b: int = 2) -> None: ...
def middle(a: int, ctx: Any, *rest: int) -> None: ...
def keyword(a: int, *, ctx: Any, flag: bool = False, **extra: Any) -> None: ...
def without(a: int, /, b: int) -> None: ...


@pytest.mark.parametrize(
    ("fn", "args", "kwargs", "expected"),
    [
        (first, [1], {}, ([CTX, 1, 2], {})),
        (first, [], {"a": 1, "b": 5}, ([CTX, 1, 5], {})),
        (middle, [1, 7, 8], {}, ([1, CTX, 7, 8], {})),
        (keyword, [1], {"flag": True, "x": 3}, ([1], {"ctx": CTX, "flag": True, "x": 3})),
        (without, [1], {"b": 2}, ([1], {"b": 2})),  # the same call: no ctx to place
    ],
)
def test_layout_puts_ctx_in_its_slot(
    fn: Any, args: list[Any], kwargs: dict[str, Any], expected: Any
) -> None:
    assert Signature.of(fn).layout(args, kwargs, CTX) == expected


def test_producers_never_pass_ctx() -> None:
    signature = Signature.of(first)
    assert signature.takes_context
    assert not Signature.of(without).takes_context
    with pytest.raises(TypeError):
        signature.check([], {"ctx": 1, "a": 1})
    with pytest.raises(TypeError):
        signature.layout([1, 2, 3], {}, CTX)


def test_without_ctx_a_shape_is_checked_once_and_a_misfit_every_time() -> None:
    signature = Signature.of(without)
    assert signature.layout([1, 2], {}, CTX) == ([1, 2], {})
    assert signature.layout([3, 4], {}, CTX) == ([3, 4], {})
    assert signature.fitting == {(2, ())}
    for _ in range(2):
        with pytest.raises(TypeError):
            signature.layout([1], {"a": 2}, CTX)  # a is positional-only
        with pytest.raises(TypeError):
            signature.layout([1, 2, 3], {}, CTX)
    assert signature.fitting == {(2, ())}
