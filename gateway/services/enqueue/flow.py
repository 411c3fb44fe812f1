"""The checks of an enqueue's flow: every dependency named outside the batch exists, and its
queue is known. (Debounce and throttle options are checked by the model, ``TaskCreate``, and
decided by the enqueue script, ``lua/enqueue.lua``; a group named by ``after_group`` is checked
there too, atomically with the tasks that join it.)"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.core.errors import FieldProblem, ValidationFailed
from gateway.store.tasks import TaskStore
from sdk.wire import TaskCreate


async def locate_dependencies(
    tasks: TaskStore, specs: Sequence[TaskCreate], batch_ids: dict[str, int]
) -> dict[str, str]:
    """The queue of every dependency outside the batch; refuses unknown ones."""
    wanted = sorted({d for spec in specs for d in spec.depends_on if d not in batch_ids})
    located: dict[str, str] = {}
    problems = []
    for dep in wanted:
        found = await tasks.locate(dep)
        if found is None:
            where = next(i for i, spec in enumerate(specs) if dep in spec.depends_on)
            problems.append(FieldProblem(f"tasks.{where}.depends_on", f"no task '{dep}' exists"))
        else:
            located[dep] = found
    if problems:
        raise ValidationFailed(problems)
    return located
