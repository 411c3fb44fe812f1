"""The admin UI with many queues and long filtered listings (issue 21), in-process: the queues
table (paging, search, sort, live part, pause keeping the view), queue pickers' suggestions,
what a filtered task search looked at, and finding a task or run by id."""

from __future__ import annotations

import re

import pytest

from gateway.services import tasks as task_service
from tests.integration.test_admin import ADMIN, READER, Rig, csrf_of, rig, sign_in
from tests.support import register_queues

__all__ = ["rig"]  # the fixture, shared with test_admin

ROW = re.compile(r'<tr data-queue="([^"]+)"')


def go_on(html: str, start: int) -> str:
    """The link that searches on from task ``start``."""
    found = re.search(rf'href="([^"]+)" rel="next">Search on from task {start} ', html)
    assert found, f"no link to search on from task {start}"
    return found.group(1).replace("&amp;", "&")


def shown(html: str) -> list[str]:
    return ROW.findall(html)


async def many(rig: Rig, redis_url: str) -> None:
    """121 queues: 'mail' (from the rig) and t000...t119; t007 holds 3 queued tasks, t042 2."""
    register_queues(redis_url, [f"t{i:03d}" for i in range(120)])
    for queue, n in (("t007", 3), ("t042", 2)):
        body = {"tasks": [{"name": "send"} for _ in range(n)]}
        assert (await rig.api.post(f"/v1/queues/{queue}/tasks/batch", json=body)).is_success


async def test_a_few_queues_are_cards_many_a_paged_table(rig: Rig, redis_url: str) -> None:
    await sign_in(rig.web, ADMIN)
    few = await rig.web.get("/admin/queues")
    assert 'class="card" data-queue="mail"' in few.text
    assert "<table" not in few.text
    await many(rig, redis_url)
    first = await rig.web.get("/admin/queues")
    assert "<table" in first.text
    assert 'class="card"' not in first.text
    assert shown(first.text) == ["mail"] + [f"t{i:03d}" for i in range(49)]
    assert "Queues 1 to 50 of 121" in first.text
    last = await rig.web.get("/admin/queues?cursor=100")
    assert shown(last.text) == [f"t{i:03d}" for i in range(99, 120)]
    assert 'rel="next"' not in last.text
    assert "/admin/queues?cursor=50" in last.text  # the previous page
    # the live part alone, for the same view
    live = await rig.web.get("/admin/queues?cursor=100", headers={"hx-request": "true"})
    assert live.text.lstrip().startswith('<div id="queues"')
    assert 'hx-get="/admin/queues?cursor=100"' in live.text
    assert shown(live.text) == shown(last.text)


async def test_the_queue_table_searches_and_sorts_by_name_or_depth(
    rig: Rig, redis_url: str
) -> None:
    await many(rig, redis_url)
    await sign_in(rig.web, ADMIN)
    found = await rig.web.get("/admin/queues?q=T04")
    assert shown(found.text) == [f"t04{i}" for i in range(10)]
    assert "Queues 1 to 10 of 10 matching <q>T04</q> (121 in all)" in found.text
    reverse = await rig.web.get("/admin/queues?q=t04&dir=desc")
    assert shown(reverse.text) == [f"t04{i}" for i in range(9, -1, -1)]
    deepest = await rig.web.get("/admin/queues?sort=queued&dir=desc")
    assert shown(deepest.text)[:4] == ["t007", "t042", "mail", "t000"]  # then by name
    assert "ordered by queued as counted" in deepest.text
    row = deepest.text.split('data-queue="t007"')[1].split("</tr>")[0]
    assert re.search(r'data-state="queued"><a [^>]*><span class="n">3</span>', row)
    # the sort links: another column starts biggest first; the same one reverses
    assert 'href="/admin/queues?sort=running&amp;dir=desc"' in deepest.text
    assert 'href="/admin/queues?sort=queued"' in deepest.text
    bad = await rig.web.get("/admin/queues?sort=nonsense")
    assert bad.status_code == 400


async def test_pause_from_the_table_returns_to_the_same_view_and_readers_get_no_buttons(
    rig: Rig, redis_url: str
) -> None:
    await many(rig, redis_url)
    await sign_in(rig.web, ADMIN)
    view = await rig.web.get("/admin/queues?q=t04&sort=queued&dir=desc")
    done = await rig.web.post(
        "/admin/queues/t042/pause",
        data={"csrf": csrf_of(view.text), "q": "t04", "sort": "queued", "dir": "desc"},
    )
    assert done.status_code == 303
    assert done.headers["location"] == "/admin/queues?q=t04&sort=queued&dir=desc&notice=paused"
    assert (await rig.api.get("/v1/queues/t042")).json()["policy"]["paused"]
    after = await rig.web.get(done.headers["location"])
    row = after.text.split('data-queue="t042"')[1].split("</tr>")[0]
    assert "paused" in row
    assert "Resume" in row
    rig.web.cookies.clear()
    await sign_in(rig.web, READER)
    seen = await rig.web.get("/admin/queues?q=t04")
    assert len(shown(seen.text)) == 10
    assert "/pause" not in seen.text
    assert "/resume" not in seen.text


async def test_queue_pickers_suggest_a_few_matching_names_never_the_whole_list(
    rig: Rig, redis_url: str
) -> None:
    await many(rig, redis_url)
    await sign_in(rig.web, ADMIN)
    for page in ("/admin/tasks", "/admin/running", "/admin/deadletters"):
        html = (await rig.web.get(page)).text
        assert '<select name="queue"' not in html, page
        assert 'list="queue-names"' in html, page
        assert html.count("<option") <= 10, page  # the states of the tasks page, no queues
    names = await rig.web.get("/admin/queue-names?queue=11")
    expected = ["t011"] + [f"t{n}" for n in range(110, 120)]
    assert names.text == "".join(f'<option value="{n}">' for n in expected)
    capped = await rig.web.get("/admin/queue-names?queue=t")
    assert capped.text.count("<option") == 20
    first = await rig.web.get("/admin/queue-names?queue=T00")
    assert first.text.startswith('<option value="t000">')


async def test_a_filtered_search_says_what_it_looked_at_and_offers_to_go_on(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(task_service, "FILTER_SCAN", 200)
    tasks = [{"name": "needle" if i in (5, 250, 420) else "hay"} for i in range(450)]
    assert (await rig.api.post("/v1/queues/mail/tasks/batch", json={"tasks": tasks})).is_success
    await sign_in(rig.web, ADMIN)
    first = await rig.web.get("/admin/tasks?queue=mail&name=needle")
    assert first.text.count("data-task=") == 1
    assert "Looked at queued tasks 1 to 200 of 450: 1 matching." in first.text
    assert 'hx-trigger="every 2s"' not in first.text.split('id="tasks"')[1][:200]
    second = await rig.web.get(go_on(first.text, 201))
    assert second.text.count("data-task=") == 1
    assert "Looked at queued tasks 201 to 400 of 450: 1 matching." in second.text
    third = await rig.web.get(go_on(second.text, 401))
    assert third.text.count("data-task=") == 1
    assert "Looked at queued tasks 401 to 450 of 450: 1 matching." in third.text
    assert "No more to look at." in third.text
    plain = await rig.web.get("/admin/tasks?queue=mail")
    assert "Looked at" not in plain.text
    assert plain.text.count("data-task=") == 50


async def test_find_a_task_or_a_run_by_id_from_any_page(rig: Rig) -> None:
    task = (await rig.api.post("/v1/queues/mail/tasks", json={"name": "send"})).json()
    job = await rig.api.post(
        "/v1/jobs", json={"title": "nightly", "task": {"queue": "mail", "name": "send"}}
    )
    assert job.status_code == 201, job.text
    run = (await rig.api.post(f"/v1/jobs/{job.json()['id']}/runs", json={})).json()
    await sign_in(rig.web, ADMIN)
    assert 'action="/admin/find"' in (await rig.web.get("/admin/jobs")).text
    to_task = await rig.web.get(f"/admin/find?id={task['id'].lower()}")
    assert to_task.status_code == 303
    assert to_task.headers["location"] == f"/admin/tasks/{task['id']}"
    to_run = await rig.web.get(f"/admin/find?id={run['id']}")
    assert to_run.headers["location"] == f"/admin/jobs/{job.json()['id']}/runs/{run['id']}"
    missing = await rig.web.get("/admin/find?id=01ARZ3NDEKTSV4RRFFQ69G5FAV")
    assert missing.status_code == 404
    assert "No task or run has the id" in missing.text
    nonsense = await rig.web.get("/admin/find?id=<b>hello</b>")
    assert nonsense.status_code == 404
    assert "is not a task or run id" in nonsense.text
    assert "<b>hello" not in nonsense.text
    assert "&lt;b&gt;hello" in nonsense.text


async def test_a_queue_name_typed_wrong_keeps_the_page_and_says_so(rig: Rig) -> None:
    await sign_in(rig.web, ADMIN)
    for page in ("/admin/tasks", "/admin/running", "/admin/deadletters"):
        answer = await rig.web.get(f"{page}?queue=nope")
        assert answer.status_code == 404, page
        assert "No queue is named <code>nope</code>" in answer.text, page
        assert 'name="queue" value="nope"' in answer.text, page  # the form, to try again
