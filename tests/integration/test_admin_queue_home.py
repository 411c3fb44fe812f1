"""A queue's home page in-process against a real Redis (issue 31): counts and recent tasks of
every state with an "all" choice, the header every tab keeps, the warning when nothing can take
queued tasks, its jobs in their time zone, totals across queues, charts in the states' own
words with a scale, counts in words that agree. (Browser: test_admin_queue_ui.py.)"""

from __future__ import annotations

import re

from gateway.admin.render import Count, plural
from sdk.wire import PushBatch
from tests.integration.test_admin import ADMIN, Rig, dead_tasks, rig, sign_in

__all__ = ["rig"]


async def succeeded(rig: Rig, queue: str, n: int) -> None:
    """``n`` tasks that ended succeeded, through a pull endpoint that is then disabled."""
    await rig.api.put(f"/v1/queues/{queue}", json={"max_attempts": 1})
    made = await rig.api.post(f"/v1/queues/{queue}/endpoints", json={"pull": True})
    endpoint_id = made.json()["id"]
    for _ in range(n):
        await rig.api.post(f"/v1/queues/{queue}/tasks", json={"name": "greet"})
        leased = await rig.api.post(
            f"/v1/queues/{queue}/leases", json={"endpoint_id": endpoint_id, "max_tasks": 1}
        )
        [item] = PushBatch.model_validate_json(leased.content).tasks
        path = "/" + item.callback.split("://", 1)[1].split("/", 1)[1]
        done = await rig.api.post(
            f"{path}/result", json={"result": 1}, headers={"jobgate-lease": item.lease}
        )
        assert done.status_code == 200, done.text
    await rig.api.patch(f"/v1/queues/{queue}/endpoints/{endpoint_id}", json={"enabled": False})


def test_counts_in_words_agree_with_their_number() -> None:
    assert plural(1, "endpoint") == "1 endpoint"
    assert plural(2, "dead letter") == "2 dead letters"
    assert plural(12_345, "task") == "12,345 tasks"
    assert plural(0, "finished task") == "0 finished tasks"
    assert plural(3, "child", "children") == "3 children"
    assert f"{Count(1):task} queued again; {Count(1_000)}" == ("1 task queued again; 1,000")


async def test_a_queue_opens_on_its_tasks_of_every_state_with_the_header_on_every_tab(
    rig: Rig,
) -> None:
    await succeeded(rig, "hello", 2)
    await dead_tasks(rig, "hello", 1)  # pauses the queue
    await rig.api.post("/v1/queues/hello/tasks", json={"name": "greet"})  # stays queued
    await sign_in(rig.web, ADMIN)
    queues = await rig.web.get("/admin/queues")
    card = queues.text.split('data-queue="hello"')[1].split("</section>")[0]
    assert 'href="/admin/queues/hello"' in card  # the card opens the queue, not Tasks
    assert 'href="/admin/queues/hello?state=dead"' in card
    page = await rig.web.get("/admin/queues/hello")
    assert page.status_code == 200
    assert '<option value="all" selected>' in page.text
    shown = re.findall(r'data-task="[^"]+" data-state="([a-z]+)"', page.text)
    assert sorted(shown) == ["dead", "queued", "succeeded", "succeeded"]
    assert re.search(r'data-state="succeeded">\s*<span class="n">2</span>', page.text)
    dead = await rig.web.get("/admin/queues/hello?state=dead")
    assert re.findall(r'data-task="[^"]+" data-state="([a-z]+)"', dead.text) == ["dead"]
    assert "1 dead task," in dead.text
    bad = await rig.web.get("/admin/queues/hello?state=nope")
    assert bad.status_code == 400  # as the Tasks page answers a bad filter
    for tab in ("", "/endpoints", "/settings", "/jobs"):
        found = await rig.web.get(f"/admin/queues/hello{tab}")
        assert found.status_code == 200, tab
        assert "<h1>Queue hello" in found.text, tab
        assert 'data-field="queue-counts"' in found.text, tab
        assert found.text.count('aria-current="page"') == 2, tab  # the section and the tab
        for link in ("", "/endpoints", "/settings", "/jobs"):
            assert f'href="/admin/queues/hello{link}"' in found.text, (tab, link)


async def test_queued_tasks_that_nothing_can_take_are_warned_of_on_the_card_and_the_page(
    rig: Rig,
) -> None:
    await rig.api.put("/v1/queues/idle", json={})
    await rig.api.put("/v1/queues/served", json={})
    await rig.api.post("/v1/queues/served/endpoints", json={"pull": True})
    for queue in ("idle", "served"):
        await rig.api.post(f"/v1/queues/{queue}/tasks", json={"name": "greet"})
    await sign_in(rig.web, ADMIN)

    async def warning(path: str, queue: str | None = None) -> str | None:
        text = (await rig.web.get(path)).text
        if queue is not None:
            text = text.split(f'data-queue="{queue}"')[1].split("</section>")[0]
        found = re.search(r'data-field="unserved"><strong>([^<]+)</strong>', text)
        return found.group(1) if found else None

    assert await warning("/admin/queues", "idle") == "1 queued task, and no endpoint is registered:"
    assert await warning("/admin/queues/idle") == "1 queued task, and no endpoint is registered:"
    assert await warning("/admin/queues", "served") is None
    assert await warning("/admin/queues/served/settings") is None
    made = await rig.api.post("/v1/queues/idle/endpoints", json={"pull": True})
    assert await warning("/admin/queues/idle/endpoints") is None
    endpoint = f"/v1/queues/idle/endpoints/{made.json()['id']}"
    await rig.api.patch(endpoint, json={"enabled": False})
    assert await warning("/admin/queues", "idle") == (
        "1 queued task, and its endpoint is disabled:"
    )
    assert await warning("/admin/queues/idle/jobs") == (
        "1 queued task, and its endpoint is disabled:"
    )


async def test_the_queues_page_totals_every_queue_and_its_charts_name_the_states(
    rig: Rig,
) -> None:
    await dead_tasks(rig, "dl-one", 2)
    await dead_tasks(rig, "dl-two", 1)
    await sign_in(rig.web, ADMIN)
    page = await rig.web.get("/admin/queues")
    totals = page.text.split('data-field="totals"')[1].split("</section>")[0]
    queues = len((await rig.api.get("/v1/queues")).json()["items"])
    assert f"Across {queues} queues" in totals
    assert re.search(r'data-state="dead"><span class="n">3</span>', totals)
    card = page.text.split('data-queue="dl-one"')[1].split("</section>")[0]
    assert "0 succeeded, 2 dead in 10 min" in card
    assert "failed" not in card.split('data-field="ended"')[1].split("</span>")[0]
    assert re.search(r'data-axis="top">2</text>', card)  # the scale: the busiest minute
    assert "10 min ago" in card
    endpoints = await rig.web.get("/admin/queues/dl-one/endpoints")
    chart = endpoints.text.split('data-field="hour-chart"')[1].split("</figure>")[0]
    assert re.search(r'data-axis="top">2</text>', chart)
    assert "0 succeeded, 2 dead" in chart
    assert "1 endpoint." in endpoints.text
    assert "endpoint(s)" not in endpoints.text


async def test_a_queue_lists_its_jobs_and_a_job_its_fire_times_in_its_own_zone(
    rig: Rig,
) -> None:
    await rig.api.put("/v1/queues/reports", json={})
    body = {
        "title": "Nightly report",
        "task": {"queue": "reports", "name": "report"},
        "schedule": {"kind": "crontab", "minute": "0", "hour": "3", "timezone": "Europe/Berlin"},
    }
    made = await rig.api.post("/v1/jobs", json=body)
    assert made.status_code == 201, made.text
    other = {**body, "title": "Elsewhere", "task": {"queue": "mail", "name": "x"}}
    await rig.api.put("/v1/queues/mail", json={})
    assert (await rig.api.post("/v1/jobs", json=other)).status_code == 201
    await sign_in(rig.web, ADMIN)
    tab = await rig.web.get("/admin/queues/reports/jobs")
    assert "Nightly report" in tab.text
    assert "Elsewhere" not in tab.text
    assert "1 job enqueues into reports" in tab.text
    zoned = re.search(r'<span class="zoned" title="([^"]+)">([^<]+)</span>', tab.text)
    assert zoned, "the next run is not shown in the job's zone"
    assert zoned.group(1).endswith("UTC")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d 03:00:00 CES?T", zoned.group(2))
    job = await rig.web.get(f"/admin/jobs/{made.json()['id']}")
    preview = job.text.split('data-field="preview"')[1].split("</dd>")[0]
    times = re.findall(r'<span class="zoned" title="([^"]+)">([^<]+)</span>', preview)
    assert len(times) == 5
    for utc, local in times:
        assert re.fullmatch(r"\d{4}-\d\d-\d\d 0[12]:00:00 UTC", utc)
        assert re.fullmatch(r"\d{4}-\d\d-\d\d 03:00:00 CES?T", local)
    assert "Europe/Berlin; UTC on hover" in job.text
    # The jobs list too (issue 31: it showed the next run only in UTC, on hover).
    listed = await rig.web.get("/admin/jobs")
    row = listed.text.split(f'data-job="{made.json()["id"]}"')[1].split("</tr>")[0]
    cell = row.split('data-field="next-run"')[1].split("</td>")[0]
    local = re.search(r'<span class="zoned" title="([^"]+)">([^<]+)</span>', cell)
    assert local, cell
    assert local.group(1).endswith("UTC")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d 03:00:00 CES?T", local.group(2))


async def test_a_queue_named_like_a_route_still_has_its_page(rig: Rig) -> None:
    """The pickers' name suggestions live outside /admin/queues/, so no queue name is hidden."""
    await rig.api.put("/v1/queues/names", json={})
    await sign_in(rig.web, ADMIN)
    page = await rig.web.get("/admin/queues/names")
    assert page.status_code == 200
    assert "<h1>Queue names" in page.text
