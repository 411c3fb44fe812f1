"""The admin UI's events page: recent events newest first, searched by name and by id, each
with the tasks it touched, linked to their pages."""

from __future__ import annotations

from .test_admin import READER, Rig, rig, sign_in

__all__ = ["rig"]  # the fixture, shared with test_admin


async def test_the_events_page_lists_searches_and_links_the_tasks(rig: Rig) -> None:
    body = {"event": "user.created", "queue": "mail", "task": "welcome"}
    assert (await rig.api.put("/v1/triggers/welcome", json=body)).status_code == 201
    made = await rig.api.post("/v1/events", json={"name": "user.created", "id": "u-1"})
    task_id = made.json()["started"][0]["id"]
    await rig.api.post("/v1/events", json={"name": "order.paid", "id": "o-1", "data": {"n": 1}})
    await sign_in(rig.web, READER)  # reading takes no more than read

    page = await rig.web.get("/admin/events")
    assert page.status_code == 200
    assert page.text.index('data-event="o-1"') < page.text.index('data-event="u-1"')
    assert f'href="/admin/tasks/{task_id}"' in page.text
    assert 'data-touched="started"' in page.text
    assert 'href="/admin/events"' in page.text  # in the menu

    named = await rig.web.get("/admin/events", params={"name": "order.paid"})
    assert 'data-event="o-1"' in named.text
    assert 'data-event="u-1"' not in named.text
    by_id = await rig.web.get("/admin/events", params={"id": "u-1"})
    assert 'data-event="u-1"' in by_id.text
    assert 'data-event="o-1"' not in by_id.text
    none = await rig.web.get("/admin/events", params={"id": "nope"})
    assert "No event &#39;nope&#39;" in none.text or "No event 'nope'" in none.text
    assert (await rig.web.get("/admin/events", params={"name": "bad name"})).status_code == 400
    live = await rig.web.get("/admin/events", headers={"hx-request": "true"})
    assert live.text.startswith('<div id="events"')
