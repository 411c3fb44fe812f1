"""How a task function is called: its producer-facing signature and the ``ctx`` parameter.

A task function may declare a parameter named ``ctx`` (best first) to receive its context.
Producers never pass it: :class:`Signature` checks their arguments against the function's
signature without ``ctx``, then lays out the real call with the context in its place.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

CONTEXT_PARAMETER = "ctx"

MAX_SHAPES = 64

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


@dataclass(frozen=True)
class Signature:
    """A task function's signature, split into what producers pass and the context slot."""

    full: inspect.Signature
    producer: inspect.Signature
    takes_context: bool
    fitting: set[tuple[int, tuple[str, ...]]] = field(
        default_factory=set, compare=False, repr=False
    )
    """Shapes of calls (how many positional arguments, which keywords) found to fit: whether
    arguments fit depends on their shape alone, and ``inspect``'s bind costs a few percent of
    a push (and of an enqueue). Kept for the first MAX_SHAPES shapes."""

    @classmethod
    def of(cls, fn: Callable[..., Any]) -> Signature:
        full = inspect.signature(fn)
        params = [p for p in full.parameters.values() if p.name != CONTEXT_PARAMETER]
        takes_context = len(params) != len(full.parameters)
        return cls(full, full.replace(parameters=params), takes_context)

    def check(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        """Raise ``TypeError`` unless a producer's arguments fit the function."""
        shape = (len(args), tuple(kwargs))
        if shape not in self.fitting:
            self.producer.bind(*args, **kwargs)
            if len(self.fitting) < MAX_SHAPES:
                self.fitting.add(shape)

    def layout(
        self, args: Sequence[Any], kwargs: Mapping[str, Any], ctx: object
    ) -> tuple[list[Any], dict[str, Any]]:
        """The real call's positional and keyword arguments, with ``ctx`` in its slot.

        Raises ``TypeError`` when the arguments do not fit (see :meth:`check`).
        """
        if not self.takes_context:
            self.check(args, kwargs)
            return list(args), dict(kwargs)
        bound = self.producer.bind(*args, **kwargs)
        bound.apply_defaults()
        values = dict(bound.arguments)
        values[CONTEXT_PARAMETER] = ctx
        call_args: list[Any] = []
        call_kwargs: dict[str, Any] = {}
        for param in self.full.parameters.values():
            value = values[param.name]
            if param.kind in _POSITIONAL:
                call_args.append(value)
            elif param.kind is inspect.Parameter.VAR_POSITIONAL:
                call_args.extend(value)
            elif param.kind is inspect.Parameter.KEYWORD_ONLY:
                call_kwargs[param.name] = value
            else:
                call_kwargs.update(value)
        return call_args, call_kwargs
