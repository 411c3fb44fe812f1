"""The ``step`` and ``sleep`` callbacks against a real gateway and Redis (docs/durable.md): a step
is recorded with the task, fenced by the lease, kept first by name, capped per task, shown in
the task's view and carried in every later push; a sleep ends the attempt without spending it
and the task is pushed again at the time asked, its steps intact."""

from __future__ import annotations

import html
import re
import time
from datetime import UTC, datetime, timedelta

import httpx

from sdk.wire import MAX_STEPS_BYTES
from tests.integration.test_release_callback import (
    ADMIN,
    Rig,
    rig,  # noqa: F401  (the fixture)
)
from tests.support import until


async def test_a_step_is_recorded_once_shown_and_carried_to_the_next_attempt(rig: Rig) -> None:  # noqa: F811
    task_id, base, lease = await rig.running()
    headers = {"jobgate-lease": lease}
    async with httpx.AsyncClient() as cb:
        first = await cb.post(
            f"{base}/step", json={"name": "charge", "result": {"n": 1}}, headers=headers
        )
        again = await cb.post(
            f"{base}/step", json={"name": "charge", "result": {"n": 2}}, headers=headers
        )
        other = await cb.post(
            f"{base}/step", json={"name": "mail", "result": [1, 2.5, "x"]}, headers=headers
        )
        no_cancel = {"cancel_requested": False}
        assert first.json() == {"recorded": True, "attempt": 1, **no_cancel}, first.text
        assert again.json() == {"recorded": False, "attempt": 1, **no_cancel}  # the first stays
        assert other.status_code == 200, other.text
        steps = (await rig.task(task_id))["steps"]
        assert [(s["name"], s["result"], s["attempt"]) for s in steps] == [
            ("charge", {"n": 1}, 1),
            ("mail", [1, 2.5, "x"], 1),
        ]
        assert abs(datetime.fromisoformat(steps[0]["recorded_at"]).timestamp() - time.time()) < 30
        released = await cb.post(f"{base}/release", headers=headers)
        assert released.status_code == 200, released.text
    task = await rig.task(task_id, wait=10)
    assert task["state"] == "succeeded"
    [(_, second)] = rig.worker.of(task_id)[1:]
    assert second.steps is not None
    assert {s.name: s.result for s in second.steps} == {"charge": {"n": 1}, "mail": [1, 2.5, "x"]}
    [(_, first_push)] = rig.worker.of(task_id)[:1]
    assert first_push.steps is None  # no steps yet: the field is absent


async def test_a_stale_attempt_cannot_record_a_step(rig: Rig) -> None:  # noqa: F811
    task_id, base, lease = await rig.running()
    async with httpx.AsyncClient() as cb:
        stale = await cb.post(
            f"{base}/step", json={"name": "a", "result": 1}, headers={"jobgate-lease": "not-it"}
        )
        assert stale.status_code == 409, stale.text
        assert stale.headers["content-type"] == "application/problem+json"
        (await cb.post(f"{base}/release", headers={"jobgate-lease": lease})).raise_for_status()
        await rig.task(task_id, wait=10)
        late = await cb.post(
            f"{base}/step", json={"name": "b", "result": 1}, headers={"jobgate-lease": lease}
        )
        assert late.status_code == 409, late.text  # the attempt ended: its lease is stale
    assert (await rig.task(task_id))["steps"] == []


async def test_steps_past_the_cap_are_refused_with_a_problem_naming_it(rig: Rig) -> None:  # noqa: F811
    task_id, base, lease = await rig.running()
    big = "x" * (MAX_STEPS_BYTES // 2)
    async with httpx.AsyncClient() as cb:
        headers = {"jobgate-lease": lease}
        ok = await cb.post(f"{base}/step", json={"name": "a", "result": big}, headers=headers)
        assert ok.status_code == 200, ok.text
        refused = await cb.post(f"{base}/step", json={"name": "b", "result": big}, headers=headers)
    assert refused.status_code == 413, refused.text
    problem = refused.json()
    assert problem["title"] == "Steps too large"
    assert str(MAX_STEPS_BYTES) in problem["detail"]
    assert "'b'" in problem["detail"]
    assert [s["name"] for s in (await rig.task(task_id))["steps"]] == ["a"]


async def test_a_sleep_comes_back_at_its_time_without_spending_an_attempt(rig: Rig) -> None:  # noqa: F811
    task_id, base, lease = await rig.running()
    headers = {"jobgate-lease": lease}
    until_at = datetime.now(UTC) + timedelta(seconds=1.5)
    async with httpx.AsyncClient() as cb:
        step = await cb.post(f"{base}/step", json={"name": "a", "result": 7}, headers=headers)
        assert step.status_code == 200, step.text
        slept = await cb.post(
            f"{base}/sleep", json={"until": until_at.isoformat()}, headers=headers
        )
        assert slept.status_code == 200, slept.text
        assert slept.json()["state"] == "scheduled"
    task = await rig.task(task_id)
    assert (task["state"], task["attempt"]) == ("scheduled", 0)
    task = await rig.task(task_id, wait=10)
    assert (task["state"], task["attempt"], task["result"]) == ("succeeded", 1, {"attempt": 1})
    [(_, second)] = rig.worker.of(task_id)[1:]
    assert second.steps is not None
    assert [s.name for s in second.steps] == ["a"]
    started = datetime.fromisoformat(task["attempts"][-1]["started_at"])
    assert started >= until_at - timedelta(milliseconds=5)


async def admin_page(at: Rig, path: str) -> str:
    """The admin UI's page at ``path``, signed in as admin."""
    async with httpx.AsyncClient(base_url=at.url) as web:
        form = await web.get("/admin/login")
        csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
        assert csrf
        data = {"csrf": csrf[1], "api_key": ADMIN, "next": "/admin/queues"}
        assert (await web.post("/admin/login", data=data)).status_code == 303
        page = await web.get(path)
    assert page.status_code == 200, page.text
    return page.text


async def test_the_admin_task_page_lists_the_steps(rig: Rig) -> None:  # noqa: F811
    task_id, base, lease = await rig.running()
    async with httpx.AsyncClient() as cb:
        step = await cb.post(
            f"{base}/step",
            json={"name": "charge-<card>", "result": {"receipt": "r-991"}},
            headers={"jobgate-lease": lease},
        )
        assert step.status_code == 200, step.text
    page = await admin_page(rig, f"/admin/tasks/{task_id}")
    assert "Steps (1)" in page
    assert "charge-&lt;card&gt;" in page  # escaped
    assert "r-991" in page
    timeline = field(page, "timeline")  # the timeline: enqueued, the running attempt, the step
    assert re.findall(r'data-kind="(\w+)"', page) == ["created", "attempt", "step"]
    assert "charge-&lt;card&gt;" in timeline
    assert '{"receipt":"r-991"}' in html.unescape(timeline)


def field(page: str, name: str) -> str:
    """The text of the admin page's element marked ``data-field="<name>"``, tags removed."""
    found = re.search(rf'<(\w+)[^>]*data-field="{name}"[^>]*>(.*?)</\1>', page, re.DOTALL)
    assert found, f"no {name} on the page"
    return re.sub(r"<[^>]+>", "", found[2]).strip()


async def test_the_admin_task_page_shows_what_the_api_shows_of_failures_and_results(
    rig: Rig,  # noqa: F811
) -> None:
    """A failure the worker reported as the task's own, a dependent that asked for results
    (with its trace and completion callback), and a success with a warning: each shown on the
    task's page as the API gives it."""
    failing, base, lease = await rig.running()
    trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    dependent = await rig.api.post(
        "/v1/queues/q/tasks",
        json={
            "name": "job",
            "depends_on": [failing],
            "pass_results": True,
            "notify": "http://127.0.0.1:9/done",
            "traceparent": trace,
        },
    )
    assert dependent.status_code == 201, dependent.text
    async with httpx.AsyncClient() as cb:
        error = {"error": "card <declined>", "retryable": False}
        ended = await cb.post(f"{base}/error", json=error, headers={"jobgate-lease": lease})
        assert ended.status_code == 200, ended.text
    failed = await rig.task(failing)
    assert failed["attempts"][0]["task_failure"] is True
    page = await admin_page(rig, f"/admin/tasks/{failing}")
    assert field(page, "task_failure") == "task's own failure:"
    assert "card &lt;declined&gt;" in page

    view = await rig.task(dependent.json()["id"])
    assert (view["pass_results"], view["trace_id"]) == (True, trace.split("-")[1])
    page = await admin_page(rig, f"/admin/tasks/{view['id']}")
    assert field(page, "pass_results").startswith("yes")
    assert field(page, "trace_id") == view["trace_id"]
    assert field(page, "notify").startswith("http://127.0.0.1:9/done")

    warned, base, lease = await rig.running()
    async with httpx.AsyncClient() as cb:
        result = {"result": 1, "warning": "2 rows <skipped>"}
        ended = await cb.post(f"{base}/result", json=result, headers={"jobgate-lease": lease})
        assert ended.status_code == 200, ended.text
    assert (await rig.task(warned))["warning"] == "2 rows <skipped>"
    page = await admin_page(rig, f"/admin/tasks/{warned}")
    assert field(page, "warning") == "warning 2 rows &lt;skipped&gt;"


async def test_the_admin_task_page_shows_an_invoke_apart_with_its_child_linked(rig: Rig) -> None:  # noqa: F811
    """A task invokes a child (the ``invoke`` callback); the child's result resumes it. Its
    page's timeline shows the invoke as its own kind, the child linked to its page, with the
    child's end, and its next push's step says how the wait ended."""
    task_id, base, lease = await rig.running()
    body = {"step": "label", "name": "job", "payload": {"n": 1}, "timeout": 60}
    async with httpx.AsyncClient() as cb:
        invoked = await cb.post(f"{base}/invoke", json=body, headers={"jobgate-lease": lease})
        assert invoked.status_code == 200, invoked.text
        child = (await rig.task(task_id))["wait"]["child"]["id"]
        await until(lambda: rig.worker.of(child), what="the child's push")
        ((headers, _),) = rig.worker.of(child)
        done = await cb.post(
            f"{headers['jobgate-callback']}/result",
            json={"result": {"label": "L-1"}},
            headers={"jobgate-lease": headers["jobgate-lease"]},
        )
        assert done.status_code == 200, done.text
    task = await rig.task(task_id, wait=10)
    assert task["state"] == "succeeded", task
    (step,) = task["steps"]
    assert step["wait"]["kind"] == "invoke"
    assert (step["wait"]["by"], step["wait"]["child"]["id"]) == ("child", child)
    [(_, second)] = rig.worker.of(task_id)[1:]
    assert second.steps is not None
    assert second.steps[0].wait == {  # the push carries it as stored
        "kind": "invoke",
        "by": "child",
        "since_ms": second.steps[0].wait["since_ms"],  # type: ignore[call-overload,index]
        "queue": "q",
        "id": child,
    }
    page = await admin_page(rig, f"/admin/tasks/{task_id}")
    kinds = re.findall(r'data-kind="(\w+)"', page)
    assert kinds == ["created", "attempt", "invoke", "attempt", "finished"], kinds
    assert f'href="/admin/tasks/{child}"' in page
    timeline = html.unescape(field(page, "timeline"))
    assert f"q / {child}" in timeline
    assert '{"label":"L-1"}' in timeline


async def test_cancelling_a_parent_through_the_api_cancels_its_waiting_child(rig: Rig) -> None:  # noqa: F811
    """The gateway's recoverer delivers the cancel of a cancelled parent's child: the child,
    queued in a queue no endpoint serves, ends cancelled."""
    (await rig.api.put("/v1/queues/idle", json={})).raise_for_status()
    task_id, base, lease = await rig.running()
    body = {"step": "s", "queue": "idle", "name": "job", "timeout": 600}
    async with httpx.AsyncClient() as cb:
        invoked = await cb.post(f"{base}/invoke", json=body, headers={"jobgate-lease": lease})
        assert invoked.status_code == 200, invoked.text
    child = (await rig.task(task_id))["wait"]["child"]["id"]
    assert (await rig.task(child))["state"] == "queued"
    cancelled = await rig.api.post(f"/v1/tasks/{task_id}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    assert (await rig.task(child, wait=10))["state"] == "cancelled"
