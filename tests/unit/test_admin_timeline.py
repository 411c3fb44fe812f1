"""A task's timeline (gateway/admin/timeline.py): a pure function of the Task model."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from gateway.admin.timeline import EntryKind, preview, sleep_until, summary, timeline
from sdk.wire import Task

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def iso(seconds: float) -> str:
    return at(seconds).isoformat()


def task(**fields: Any) -> Task:
    base: dict[str, Any] = {
        "id": "01J0000000000000000000TASK",
        "queue": "q",
        "name": "flow",
        "state": "succeeded",
        "max_attempts": 3,
        "created_at": iso(0),
        "run_at": iso(0),
    }
    return Task.model_validate({**base, **fields})


def attempt(number: int, start: float, end: float | None, outcome: str, **more: Any) -> Any:
    found = {"number": number, "started_at": iso(start), "outcome": outcome, **more}
    if end is not None:
        found["ended_at"] = iso(end)
    return found


def step(name: str, result: Any, attempt: int, recorded: float) -> Any:
    return {"name": name, "result": result, "attempt": attempt, "recorded_at": iso(recorded)}


def test_steps_a_sleep_and_two_attempts_merge_in_the_order_they_happened() -> None:
    done = task(
        started_at=iso(60),
        run_at=iso(60),  # moved by the sleep: not the enqueue's
        finished_at=iso(62),
        result={"ok": True},
        attempt=1,
        attempts=[  # the sleep spent no attempt: the push after it is attempt 1 again
            attempt(1, 60, 62, "succeeded", http_status=200, endpoint_id="ep1"),
            attempt(1, 1, 3, "released", http_status=202, endpoint_id="ep1"),
        ],
        steps=[
            step("before", 1, 1, 2),
            step("nap", {"until": iso(60)}, 1, 2.5),
            step("after", "x" * 200, 1, 61),
        ],
    )
    entries = timeline(done, now=at(100), endpoints={"ep1": "http://w/"})
    assert [(e.kind, e.label) for e in entries] == [
        (EntryKind.CREATED, "enqueued"),
        (EntryKind.ATTEMPT, "attempt 1"),
        (EntryKind.STEP, "before"),
        (EntryKind.SLEEP, "nap"),
        (EntryKind.ATTEMPT, "attempt 1"),
        (EntryKind.STEP, "after"),
        (EntryKind.FINISHED, "succeeded"),
    ]
    assert entries[0].facts == []
    first = entries[1]
    assert (first.outcome, first.end, first.took) == ("released", at(3), 2.0)
    facts = {f.label: f.text for f in first.facts}
    assert facts == {"HTTP": "202", "attempt": "not spent", "endpoint": "http://w/"}
    assert {f.label for f in entries[4].facts} == {"HTTP", "endpoint"}
    nap = entries[3]
    assert (nap.outcome, nap.end) == ("slept", at(60))
    assert next((f.label, f.moment) for f in nap.facts) == ("slept until", at(60))
    after = {f.label: f.text for f in entries[5].facts}
    assert after["attempt"] == "1"
    assert after["result"].startswith('"xxx')
    assert after["result"].endswith("(202 bytes)")
    assert {f.label: f.text for f in entries[6].facts} == {"result": '{"ok":true}'}


def test_a_sleep_not_yet_over_reads_sleeping_and_the_task_waits_for_its_next_push() -> None:
    asleep = task(
        state="scheduled",
        run_at=iso(600),
        attempt=1,
        attempts=[attempt(1, 1, 3, "released")],
        steps=[step("nap", {"until": iso(600)}, 1, 2)],
    )
    entries = timeline(asleep, now=at(10))
    assert [e.kind for e in entries] == [
        EntryKind.CREATED,
        EntryKind.ATTEMPT,
        EntryKind.SLEEP,
        EntryKind.NOW,
    ]
    assert entries[2].outcome == "sleeping"
    assert entries[3].at == at(10)
    assert [(f.label, f.moment) for f in entries[3].facts] == [("next push at", at(600))]


def test_a_running_attempt_is_shown_before_it_is_recorded_and_nothing_follows_it() -> None:
    running = task(state="running", attempt=1, started_at=iso(5), endpoint_id="ep9")
    entries = timeline(running, now=at(10))
    assert [e.kind for e in entries] == [EntryKind.CREATED, EntryKind.ATTEMPT]
    assert (entries[1].outcome, entries[1].end, entries[1].took) == ("running", None, None)
    assert [f.text for f in entries[1].facts] == ["ep9"]
    # After a sleep released attempt 1, the push running now is attempt 1 again.
    slept = [attempt(1, 1, 2, "released")]
    again = timeline(task(state="running", attempt=1, started_at=iso(5), attempts=slept))
    assert [(e.label, e.outcome) for e in again[1:]] == [
        ("attempt 1", "released"),
        ("attempt 1", "running"),
    ]


def test_failures_show_the_error_summary_the_failure_kind_and_the_final_error() -> None:
    dead = task(
        state="dead",
        attempt=2,
        finished_at=iso(9),
        error="boom\nTraceback (most recent call last): ...",
        attempts=[
            attempt(1, 1, 2, "error", error="timed out", failure="timeout"),
            attempt(
                2,
                5,
                9,
                "failed",
                http_status=500,
                failure="5xx",
                error="boom\nmore",
                task_failure=True,
            ),
            attempt(2, 20, 20, "redriven"),
        ],
    )
    entries = timeline(dead, now=at(30))
    kinds = [e.kind for e in entries]
    assert kinds == [
        EntryKind.CREATED,
        EntryKind.ATTEMPT,
        EntryKind.ATTEMPT,
        EntryKind.FINISHED,
        EntryKind.REDRIVE,
    ]
    assert [(f.label, f.text) for f in entries[1].facts] == [("failure", "timeout")]
    assert entries[1].error == "timed out"
    assert [(f.label, f.text) for f in entries[2].facts] == [("HTTP", "500 (5xx)")]
    assert entries[2].error == "task's own failure: boom"
    assert (entries[3].outcome, entries[3].error) == ("dead", "boom")


def test_an_enqueue_for_later_and_after_dependencies_says_so_and_the_wait_shows_now() -> None:
    waiting = task(
        state="waiting",
        run_at=iso(60),
        depends_on=["01J00000000000000000000DEP"],
        after_group="batch",
        waiting_on=["group:batch"],
    )
    entries = timeline(waiting, now=at(1))
    created = entries[0]
    assert [(f.label, f.text, f.moment) for f in created.facts] == [
        ("to run at", "", at(60)),
        ("after", "01J00000000000000000000DEP, group:batch", None),
    ]
    assert (entries[-1].kind, entries[-1].label) == (EntryKind.NOW, "waiting")
    assert [f.text for f in entries[-1].facts] == ["group:batch"]
    queued = timeline(task(state="queued"), now=at(1))
    assert [e.kind for e in queued] == [EntryKind.CREATED, EntryKind.NOW]


def test_a_sleep_is_a_step_whose_only_field_is_until_as_an_iso_time_or_epoch_ms() -> None:
    assert sleep_until({"until": "2030-01-01T12:00:00+00:00"}) == T0
    assert sleep_until({"until": "2030-01-01T12:00:00"}) == T0  # naive: UTC
    assert sleep_until({"until": int(T0.timestamp() * 1000)}) == T0
    for other in ({"until": "soon"}, {"until": True}, {"until": 1, "x": 2}, [1], "until", None):
        assert sleep_until(other) is None


def test_previews_and_summaries_are_short() -> None:
    assert preview({"a": [1, 2]}) == '{"a":[1,2]}'
    assert preview("é" * 100, limit=10) == '"éééééééé… (202 bytes)'
    assert summary("first line\nsecond") == "first line"
    assert summary("x" * 300, limit=5) == "xxxx…"
    assert summary("  \n ") == ""


def waiting_task(wait: dict[str, Any]) -> Task:
    """A task whose first attempt ended released, waiting (scheduled) with ``wait``."""
    return task(
        state="scheduled",
        run_at=iso(600),
        attempt=1,
        attempts=[attempt(1, 1, 3, "released")],
        wait=wait,
    )


def test_a_task_waiting_for_an_event_says_which_event_what_it_matches_and_until_when() -> None:
    waiting = waiting_task(
        {
            "step": "approval",
            "event": "order.approved",
            "match": {"order": "A-1"},
            "until": iso(600),
        },
    )
    now_entry = timeline(waiting, now=at(10))[-1]
    assert (now_entry.kind, now_entry.label) == (EntryKind.NOW, "waiting for an event")
    assert [(f.label, f.text or f.moment) for f in now_entry.facts] == [
        ("step", "approval"),
        ("event", "order.approved"),
        ("match", 'order="A-1"'),
        ("until", at(600)),
    ]


def test_a_task_waiting_for_a_child_it_invoked_names_the_child() -> None:
    waiting = waiting_task(
        {
            "step": "label",
            "child": {"queue": "print", "id": "01J0000000000000000000CHLD"},
            "until": iso(600),
        },
    )
    now_entry = timeline(waiting, now=at(10))[-1]
    assert now_entry.label == "waiting for a child task"
    assert [(f.label, f.text or f.moment) for f in now_entry.facts] == [
        ("step", "label"),
        ("child", "print / 01J0000000000000000000CHLD"),
        ("until", at(600)),
    ]
    assert now_entry.facts[1].task == "01J0000000000000000000CHLD"  # linked to its page


CHILD = "01J0000000000000000000CHLD"


def ended(name: str, result: Any, since: float, recorded: float, **wait: Any) -> Any:
    """A step a wait recorded when it ended, with its ``wait``."""
    return {**step(name, result, 2, recorded), "wait": {"since": iso(since), **wait}}


def test_ended_waits_show_their_kind_times_and_outcome_apart_from_steps() -> None:
    """An event wait matched and one timed out, an invoke whose child succeeded and one whose
    child failed, a wait of a kind this version does not know (a durable call's), and a plain
    step: each its own kind, from the wait's start to its end, with its outcome."""
    event = {"id": "01J00000000000000000000EVT", "name": "paid", "data": {"order": 1}}
    done = task(
        finished_at=iso(100),
        steps=[
            step("plain", {"state": "succeeded"}, 1, 1),
            ended("payment", event, 2, 12, kind="event", by="event", event="paid"),
            ended("approval", None, 13, 43, kind="event", by="timeout", event="approved"),
            ended(
                "label",
                {"state": "succeeded", "id": CHILD, "result": {"n": 1}},
                44,
                50,
                kind="invoke",
                by="child",
                child={"queue": "print", "id": CHILD},
            ),
            ended(
                "ship",
                {"state": "dead", "id": CHILD, "error": "no carrier\ntrace"},
                51,
                55,
                kind="invoke",
                by="child",
                child={"queue": "print", "id": CHILD},
            ),
            ended(
                "fetch",
                {"status": 200, "headers": {}, "body": "ok"},
                56,
                57,
                kind="call",
                by="call",
                call={"method": "POST", "url": "https://api.example.com/q"},
            ),
            ended(
                "poll", {"error": "refused", "kind": "unreachable"}, 58, 59, kind="call", by="call"
            ),
            ended("later", {"kind": "new"}, 60, 61, kind="newer", by="something"),
        ],
    )
    entries = [e for e in timeline(done, now=at(200)) if e.kind not in FRAME]
    assert [(e.kind, e.label, e.outcome, e.at, e.end) for e in entries] == [
        (EntryKind.STEP, "plain", "", at(1), None),
        (EntryKind.EVENT, "payment", "matched", at(2), at(12)),
        (EntryKind.EVENT, "approval", "timed out", at(13), at(43)),
        (EntryKind.INVOKE, "label", "succeeded", at(44), at(50)),
        (EntryKind.INVOKE, "ship", "dead", at(51), at(55)),
        (EntryKind.CALL, "fetch", "answered 200", at(56), at(57)),
        (EntryKind.CALL, "poll", "unreachable", at(58), at(59)),
        (EntryKind.WAIT, "later", "something", at(60), at(61)),
    ]
    facts = [{f.label: f.text or f.moment for f in e.facts} for e in entries[1:]]
    assert facts[0] == {
        "event": "paid",
        "event id": event["id"],
        "resumed": at(12),
        "attempt": "2",
    }
    assert facts[1] == {"event": "approved", "resumed": at(43), "attempt": "2"}
    assert facts[2]["child"] == f"print / {CHILD}"
    assert facts[2]["result"] == '{"n":1}'
    assert next(f for f in entries[3].facts if f.label == "child").task == CHILD
    assert facts[3]["error"] == "no carrier"
    assert facts[4]["call"] == "POST https://api.example.com/q"
    assert facts[5]["error"] == "refused"
    assert facts[6]["kind"] == "newer"
    assert entries[2].took == 30.0


FRAME = {EntryKind.CREATED, EntryKind.FINISHED}


def test_a_task_waiting_for_an_http_call_names_its_method_and_url_since_and_until() -> None:
    url = "https://api.example.com/charges"
    waiting = waiting_task(
        {
            "step": "charge",
            "call": {"method": "POST", "url": url, "since": iso(3)},
            "until": iso(600),
        },
    )
    now_entry = timeline(waiting, now=at(10))[-1]
    assert now_entry.label == "waiting for an HTTP call"
    assert [(f.label, f.text or f.moment) for f in now_entry.facts] == [
        ("step", "charge"),
        ("call", f"POST {url}"),
        ("since", at(3)),
        ("until", at(600)),
    ]
