"""A task's timeline: one chronological list of what happened to it, for its admin page.

:func:`timeline` is a pure function of the :class:`~sdk.wire.Task` the tasks service returns
(and the time it is read at): no I/O, so it is unit-tested on its own. Each :class:`Entry` has
a kind (:class:`EntryKind`), a start time and, for what lasted, an end time, a short label,
an outcome (a badge) and a few facts; the template (``_timeline.html``) draws every kind the
same way, so a new kind needs no template change.

Adding a kind: add its member to :class:`EntryKind` (with a comment saying what it is), then
one case: a recorded step of that kind in :func:`_step_entry` (the order of the cases there is
the order they are tried), or a field of the task (such as the ``wait`` of a task waiting now)
in :func:`_now_entry`. A wait that ended is a step with ``wait`` (what it waited for, since
when, what ended it): its kind's case is in :data:`_WAIT_KINDS`, keyed by ``wait.kind`` (a
kind a newer gateway adds shows as a wait of an unknown kind, with its times and what ended
it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum

from pydantic import JsonValue

from sdk.wire import Attempt, AttemptOutcome, StepWait, Task, TaskState, TaskStep, TaskWait

PREVIEW = 80  # characters of a step's result or a task's result shown inline
ERROR = 200  # characters of an error's first line shown inline


class EntryKind(StrEnum):
    """What a timeline entry stands for."""

    CREATED = "created"  # the task was enqueued (its created time; run_at when later)
    ATTEMPT = "attempt"  # one push or lease of the task: start → end, outcome, status, error
    REDRIVE = "redrive"  # not an attempt: the queue's redrive policy queued the dead task again
    STEP = "step"  # a durable step recorded: name, the attempt that recorded it, its result
    SLEEP = "sleep"  # a durable sleep: a step whose result is {"until": time}
    # A wait that ended, from when it was recorded to the step its end recorded:
    EVENT = "event"  # a wait for an event: its name, matched (the event's id) or timed out
    INVOKE = "invoke"  # a wait for a child task: the child (linked), its end state
    CALL = "call"  # a durable HTTP call: its method and URL, the answer's status or the failure
    WAIT = "wait"  # a wait of a kind this version does not know: its times, what ended it
    NOW = "now"  # an unfinished task not running: what it waits for (queued, a time, deps,
    # an event: its step, the event's name and match, until when)
    FINISHED = "finished"  # the task ended: its final state, with its result or error


@dataclass(frozen=True, slots=True)
class Fact:
    """One labelled detail of an entry: text, or a time (drawn as a ``<time>``)."""

    label: str
    text: str = ""
    moment: datetime | None = None
    mono: bool = False
    task: str = ""  # a task id: the text links to its page


@dataclass(frozen=True, slots=True)
class Entry:
    """One line of the timeline. ``end`` is set for what lasted (an attempt, a sleep);
    ``outcome`` names a badge (an attempt's outcome, a task state) or is empty."""

    kind: EntryKind
    at: datetime
    label: str
    end: datetime | None = None
    outcome: str = ""
    facts: list[Fact] = field(default_factory=list)
    error: str = ""

    @property
    def took(self) -> float | None:
        """Seconds from ``at`` to ``end``, for an entry that lasted."""
        return None if self.end is None else (self.end - self.at).total_seconds()


UNSPENT = frozenset({AttemptOutcome.RELEASED, AttemptOutcome.BUSY, AttemptOutcome.GONE})
"""Outcomes of a push that spent no attempt: the next push has the same number."""

# Among entries at the same instant: the enqueue first, the final state last.
_RANK = {EntryKind.CREATED: 0, EntryKind.NOW: 2, EntryKind.FINISHED: 3}


def timeline(
    task: Task, now: datetime | None = None, endpoints: Mapping[str, str] | None = None
) -> list[Entry]:
    """The task's timeline, oldest first: its enqueue, each attempt (a running one too), each
    recorded step and sleep, and its final state (or, unfinished and not running, what it
    waits for). ``endpoints`` maps endpoint ids to what to show for them (their URLs)."""
    now = now or datetime.now(UTC)
    urls = endpoints or {}
    entries = [_created(task)]
    entries += [_attempt_entry(a, urls) for a in pushes(task)]
    entries += [_step_entry(s, now) for s in task.steps]
    last = _finished(task) if task.state.finished else _now_entry(task, now)
    if last is not None:
        entries.append(last)
    ordered = sorted(enumerate(entries), key=lambda e: (e[1].at, _RANK.get(e[1].kind, 1), e[0]))
    return [e for _, e in ordered]


def _created(task: Task) -> Entry:
    facts = []
    # run_at is the next push's time: the enqueue's own only until a first push.
    if task.run_at > task.created_at and not task.attempts and task.started_at is None:
        facts.append(Fact("to run at", moment=task.run_at))
    if task.depends_on or task.after_group:
        after = [*task.depends_on, *([f"group:{task.after_group}"] if task.after_group else [])]
        facts.append(Fact("after", ", ".join(after), mono=True))
    return Entry(EntryKind.CREATED, task.created_at, "enqueued", facts=facts)


def pushes(task: Task) -> list[Attempt]:
    """The attempts recorded, with the one running now (not recorded until it ends). A push
    that spent no attempt (released by a sleep, busy, gone) keeps the number the next one has,
    so the running one is known by its start, not its number."""
    found = list(task.attempts)
    started = task.started_at
    if (
        task.state is TaskState.RUNNING
        and started is not None
        and not any(a.started_at >= started for a in found)
    ):
        found.append(
            Attempt(
                number=task.attempt,
                endpoint_id=task.endpoint_id,
                started_at=started,
                outcome=AttemptOutcome.RUNNING,
            )
        )
    return found


def _attempt_entry(attempt: Attempt, urls: Mapping[str, str]) -> Entry:
    if attempt.outcome is AttemptOutcome.REDRIVEN:
        return Entry(EntryKind.REDRIVE, attempt.started_at, "redriven", outcome="redriven")
    facts = []
    if attempt.http_status is not None:
        kind = f" ({attempt.failure.value})" if attempt.failure else ""
        facts.append(Fact("HTTP", f"{attempt.http_status}{kind}"))
    elif attempt.failure is not None:
        facts.append(Fact("failure", attempt.failure.value))
    if attempt.endpoint_id:
        facts.append(
            Fact("endpoint", urls.get(attempt.endpoint_id, attempt.endpoint_id), mono=True)
        )
    if attempt.outcome in UNSPENT:
        facts.append(Fact("attempt", "not spent"))
    error = summary(attempt.error) if attempt.error else ""
    if error and attempt.task_failure:
        error = f"task's own failure: {error}"
    return Entry(
        EntryKind.ATTEMPT,
        attempt.started_at,
        f"attempt {attempt.number}",
        end=attempt.ended_at,
        outcome=attempt.outcome.value,
        facts=facts,
        error=error,
    )


def _step_entry(step: TaskStep, now: datetime) -> Entry:
    """A recorded step, by what its result says it was (one case per kind of step)."""
    recorded = Fact("attempt", str(step.attempt))
    if step.wait is not None:
        return _ended_wait(step, step.wait, recorded)
    until = sleep_until(step.result)
    if until is not None:
        done = "slept" if until <= now else "sleeping"
        return Entry(
            EntryKind.SLEEP,
            step.recorded_at,
            step.name,
            end=until,
            outcome=done,
            facts=[Fact(f"{done} until", moment=until), recorded],
        )
    return Entry(
        EntryKind.STEP,
        step.recorded_at,
        step.name,
        facts=[recorded, Fact("result", preview(step.result), mono=True)],
    )


def _ended_wait(step: TaskStep, wait: StepWait, recorded: Fact) -> Entry:
    """A wait that ended: from when it was recorded (or its step's time, for a record that
    does not say) to its step, with what it waited for and its outcome, by its kind."""
    kind, outcome, facts = _WAIT_KINDS.get(wait.kind, _other_wait)(step, wait)
    since = wait.since or step.recorded_at
    facts = [*facts, Fact("resumed", moment=step.recorded_at), recorded]
    return Entry(kind, since, step.name, end=step.recorded_at, outcome=outcome, facts=facts)


WaitCase = Callable[[TaskStep, StepWait], tuple[EntryKind, str, list[Fact]]]


def _event_wait(step: TaskStep, wait: StepWait) -> tuple[EntryKind, str, list[Fact]]:
    facts = [Fact("event", wait.event or "", mono=True)]
    if wait.by == "timeout" or not isinstance(step.result, dict):
        return EntryKind.EVENT, "timed out", facts
    facts.append(Fact("event id", str(step.result.get("id", "")), mono=True))
    return EntryKind.EVENT, "matched", facts


def _invoke_wait(step: TaskStep, wait: StepWait) -> tuple[EntryKind, str, list[Fact]]:
    end = step.result if isinstance(step.result, dict) else {}
    facts = []
    if wait.child is not None:
        child = wait.child
        facts.append(Fact("child", f"{child.queue} / {child.id}", mono=True, task=child.id))
    if end.get("state") == "succeeded":
        facts.append(Fact("result", preview(end.get("result")), mono=True))
    elif end.get("error"):
        facts.append(Fact("error", summary(str(end["error"]))))
    return EntryKind.INVOKE, str(end.get("state") or wait.by).replace("_", " "), facts


def _call_wait(step: TaskStep, wait: StepWait) -> tuple[EntryKind, str, list[Fact]]:
    facts = []
    if wait.call is not None:
        facts.append(Fact("call", f"{wait.call.method} {wait.call.url}", mono=True))
    end = step.result if isinstance(step.result, dict) else {}
    if wait.by == "timeout":
        return EntryKind.CALL, "timed out", facts
    if "status" in end:
        return EntryKind.CALL, f"answered {end['status']}", facts
    facts.append(Fact("error", summary(str(end.get("error", "")))))
    return EntryKind.CALL, str(end.get("kind") or "failed").replace("_", " "), facts


def _other_wait(step: TaskStep, wait: StepWait) -> tuple[EntryKind, str, list[Fact]]:
    return EntryKind.WAIT, wait.by, [Fact("kind", wait.kind, mono=True)]


_WAIT_KINDS: dict[str, WaitCase] = {
    "event": _event_wait,
    "invoke": _invoke_wait,
    "call": _call_wait,
}
"""A wait's case by its kind (``StepWait.kind``): its entry kind, outcome and facts."""


def _now_entry(task: Task, now: datetime) -> Entry | None:
    """What an unfinished task waits for now (one case per state, or per field of the task
    it waits on); None while it runs (its attempt says so)."""
    if task.state is TaskState.SCHEDULED and task.wait is not None:
        return _wait_entry(task.wait, now)
    if task.state is TaskState.SCHEDULED:
        fact = Fact("next push at", moment=task.run_at)
    elif task.state is TaskState.WAITING:
        fact = Fact("on", ", ".join(task.waiting_on), mono=True)
    elif task.state is TaskState.QUEUED:
        fact = Fact("since", moment=task.run_at)
    else:
        return None
    state = task.state.value
    return Entry(EntryKind.NOW, now, state, outcome=state, facts=[fact])


def _wait_entry(wait: TaskWait, now: datetime) -> Entry:
    """A task that waits for an event (its name and the fields to match), for a child task it
    invoked, or for an HTTP call the gateway makes for it (its method and URL, since when),
    until the wait's timeout."""
    facts = [Fact("step", wait.step, mono=True)]
    if wait.call is not None:
        label = "waiting for an HTTP call"
        facts.append(Fact("call", f"{wait.call.method} {wait.call.url}", mono=True))
        facts.append(Fact("since", moment=wait.call.since))
    elif wait.child is not None:
        label = "waiting for a child task"
        child = wait.child
        facts.append(Fact("child", f"{child.queue} / {child.id}", mono=True, task=child.id))
    else:
        label = "waiting for an event"
        match = ", ".join(f"{k}={json.dumps(v)}" for k, v in (wait.match or {}).items())
        facts.append(Fact("event", wait.event or "", mono=True))
        facts.append(Fact("match", match or "any", mono=True))
    facts.append(Fact("until", moment=wait.until))
    return Entry(EntryKind.NOW, now, label, outcome="scheduled", facts=facts)


def _finished(task: Task) -> Entry:
    at = task.finished_at or task.run_at
    facts = []
    if task.state is TaskState.SUCCEEDED:
        facts.append(Fact("result", preview(task.result), mono=True))
        if task.warning:
            facts.append(Fact("warning", summary(task.warning)))
    return Entry(
        EntryKind.FINISHED,
        at,
        task.state.value,
        outcome=task.state.value,
        facts=facts,
        error=summary(task.error) if task.error else "",
    )


def sleep_until(result: JsonValue) -> datetime | None:
    """The wake time of a durable sleep's step (``{"until": <ISO time or epoch ms>}``: the
    SDK records an ISO time), or None for any other result."""
    if not isinstance(result, dict) or set(result) != {"until"}:
        return None
    value = result["until"]
    try:
        if isinstance(value, str):
            moment = datetime.fromisoformat(value)
            return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return datetime.fromtimestamp(value / 1000, UTC)
    except (ValueError, OverflowError, OSError):
        return None
    return None


def preview(value: JsonValue, limit: int = PREVIEW) -> str:
    """Compact JSON, cut to ``limit`` characters (with its full size when cut)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if len(text) <= limit:
        return text
    return f"{text[: limit - 1]}… ({len(text.encode()):,} bytes)"


def summary(text: str, limit: int = ERROR) -> str:
    """An error's first line, cut to ``limit`` characters."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= limit else f"{first[: limit - 1]}…"
