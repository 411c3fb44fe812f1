"""The first checks of an enqueue's specification, its options: no task id given twice in one
batch, and completion callback URLs that obey the endpoints' address rules."""

from __future__ import annotations

from collections.abc import Sequence

from gateway.core.errors import DuplicateTaskId, FieldProblem
from gateway.security.ssrf import check_endpoint_url
from sdk.wire import TaskCreate


def given_ids(specs: Sequence[TaskCreate]) -> dict[str, int]:
    """The ids the client chose, each with its task's index; raises DuplicateTaskId when one
    is given twice."""
    seen: dict[str, int] = {}
    repeats = []
    for i, spec in enumerate(specs):
        if spec.id is not None:
            if spec.id in seen:
                repeats.append((i, seen[spec.id]))
            seen[spec.id] = i
    if repeats:
        raise DuplicateTaskId(repeats)
    return seen


async def notify_problems(specs: Sequence[TaskCreate], allow_private: bool) -> list[FieldProblem]:
    """Completion callback URLs obey the endpoints' address rules (checked again at every
    delivery, by the guarded session)."""
    problems = []
    for i, spec in enumerate(specs):
        if spec.notify is not None:
            try:
                await check_endpoint_url(spec.notify, allow_private)
            except ValueError as e:
                problems.append(FieldProblem(f"tasks.{i}.notify", str(e)))
    return problems
