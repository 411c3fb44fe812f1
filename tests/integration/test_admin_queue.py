"""One queue's admin pages in-process against a real Redis: endpoints (figures, catalog,
enable and disable, secret rotation shown once), the settings form (the API's model and its
messages), and purging finished tasks with a confirmation. (Browser: test_admin_views_ui.py.)"""

from __future__ import annotations

import httpx

from tests.integration.test_admin import ADMIN, READER, Rig, csrf_of, rig, sign_in

__all__ = ["rig"]
SCHEMA = {"type": "object", "properties": {"to": {"type": "string"}}}


async def endpoint(rig: Rig) -> dict[str, str]:
    body = {
        "url": "http://127.0.0.1:9/hook",
        "concurrency": 4,
        "tasks": [{"name": "send", "schema": SCHEMA}],
    }
    made = await rig.api.post("/v1/queues/mail/endpoints", json=body)
    assert made.status_code == 201
    return dict(made.json())


async def post(
    web: httpx.AsyncClient, page: str, url: str, data: dict[str, object]
) -> httpx.Response:
    token = csrf_of((await web.get(page)).text)
    return await web.post(url, data={"csrf": token, **data})


async def test_endpoints_show_their_figures_and_catalog_and_are_disabled_and_rotated(
    rig: Rig,
) -> None:
    made = await endpoint(rig)
    await sign_in(rig.web, ADMIN)
    page = await rig.web.get("/admin/queues/mail/endpoints")
    assert page.status_code == 200
    assert "http://127.0.0.1:9/hook" in page.text
    assert "0 / 4" in page.text
    assert "circuit closed" in page.text
    assert ">send</summary>" in page.text
    base = f"/admin/queues/mail/endpoints/{made['id']}"
    done = await post(rig.web, "/admin/queues/mail/endpoints", base + "/disable", {})
    assert done.status_code == 303
    listed = (await rig.api.get("/v1/queues/mail/endpoints")).json()["items"][0]
    assert listed["enabled"] is False
    page = await rig.web.get(done.headers["location"])
    assert "Endpoint disabled" in page.text
    assert "disabled by an admin" in page.text
    await post(rig.web, "/admin/queues/mail/endpoints", base + "/enable", {})
    assert (await rig.api.get("/v1/queues/mail/endpoints")).json()["items"][0]["enabled"]
    rotated = await post(
        rig.web, "/admin/queues/mail/endpoints", base + "/secret", {"overlap": "0"}
    )
    assert rotated.status_code == 200
    assert "shown this once" in rotated.text
    assert made["secret"] not in rotated.text
    assert "whsec_" in rotated.text
    again = await rig.web.get("/admin/queues/mail/endpoints")
    assert "whsec_" not in again.text  # never shown again


async def test_the_settings_form_saves_what_changed_and_names_each_problem(rig: Rig) -> None:
    await sign_in(rig.web, ADMIN)
    page = await rig.web.get("/admin/queues/mail/settings")
    assert page.status_code == 200
    assert 'name="lease_timeout" value="30"' in page.text
    assert 'name="use.redrive"' in page.text
    form = {
        "lease_timeout": "45",
        "max_attempts": "5",
        "backoff.strategy": "linear",
        "backoff.base_delay": "1",
        "backoff.max_delay": "300",
        "use.rate_limit": "1",
        "rate_limit.per_second": "2.5",
        "rate_limit.burst": "3",
    }
    # every other field as the page shows it
    shown = await rig.api.get("/v1/queues/mail")
    policy = shown.json()["policy"]
    for name in ("push_timeout", "max_run_time", "max_concurrency", "max_retry_duration"):
        form[name] = str(policy[name])
    for name in ("retention_succeeded", "retention_failed", "dedup_window"):
        form[name] = str(policy[name])
    form.update({"dead_letter": "true", "stall_policy": "wait", "metrics_granularity": "task"})
    form["unknown_tasks"] = "refuse"
    form.update({f"circuit_breaker.{k}": str(v) for k, v in policy["circuit_breaker"].items()})
    saved = await post(rig.web, "/admin/queues/mail/settings", "/admin/queues/mail/settings", form)
    assert saved.status_code == 303, saved.text
    policy = (await rig.api.get("/v1/queues/mail")).json()["policy"]
    assert policy["lease_timeout"] == 45
    assert policy["backoff"]["strategy"] == "linear"
    assert policy["rate_limit"] == {"per_second": 2.5, "burst": 3}
    assert policy["max_attempts"] == 5

    bad = {**form, "lease_timeout": "-1", "backoff.max_delay": "-0.5", "max_attempts": "2.5"}
    refused = await post(rig.web, "/admin/queues/mail/settings", "/admin/queues/mail/settings", bad)
    assert refused.status_code == 422
    assert "Nothing was saved" in refused.text
    assert 'data-problem="lease_timeout">Input should be greater than 0' in refused.text
    assert 'data-problem="backoff.max_delay">Input should be greater than or equal to 0' in (
        refused.text
    )
    assert 'data-problem="max_attempts"' in refused.text
    assert 'value="-1"' in refused.text  # what was typed is kept
    assert (await rig.api.get("/v1/queues/mail")).json()["policy"]["lease_timeout"] == 45

    off = {k: v for k, v in form.items() if k != "use.rate_limit"}
    await post(rig.web, "/admin/queues/mail/settings", "/admin/queues/mail/settings", off)
    assert (await rig.api.get("/v1/queues/mail")).json()["policy"]["rate_limit"] is None


async def test_purge_counts_asks_and_deletes_finished_tasks_only(rig: Rig) -> None:
    made = await rig.api.post(
        "/v1/queues/mail/tasks:batch", json={"tasks": [{"name": "send"}, {"name": "send"}]}
    )
    ids = [t["id"] for t in made.json()["tasks"]] if made.status_code < 300 else []
    if not ids:
        ids = [(await rig.api.post("/v1/queues/mail/tasks", json={"name": "send"})).json()["id"]]
        ids.append(
            (await rig.api.post("/v1/queues/mail/tasks", json={"name": "send"})).json()["id"]
        )
    await rig.api.post(f"/v1/tasks/{ids[0]}/cancel")
    await sign_in(rig.web, ADMIN)
    ask = await rig.web.get("/admin/queues/mail/purge")
    assert ask.status_code == 200
    assert "<strong>1 finished task</strong>" in ask.text
    unconfirmed = await post(rig.web, "/admin/queues/mail/purge", "/admin/queues/mail/purge", {})
    assert unconfirmed.status_code == 422
    assert (await rig.api.get(f"/v1/tasks/{ids[0]}")).status_code == 200
    done = await post(
        rig.web, "/admin/queues/mail/purge", "/admin/queues/mail/purge", {"confirm": "yes"}
    )
    assert done.status_code == 303
    assert "1 finished task deleted" in (await rig.web.get(done.headers["location"])).text
    assert (await rig.api.get(f"/v1/tasks/{ids[0]}")).status_code == 404
    assert (await rig.api.get(f"/v1/tasks/{ids[1]}")).json()["state"] == "queued"


async def test_a_read_only_key_sees_endpoints_and_settings_but_no_control(rig: Rig) -> None:
    made = await endpoint(rig)
    await sign_in(rig.web, READER)
    for path in ("endpoints", "settings", "purge"):
        page = await rig.web.get(f"/admin/queues/mail/{path}")
        assert page.status_code == 200, path
        assert 'method="post" action="/admin/queues' not in page.text, path
    settings = await rig.web.get("/admin/queues/mail/settings")
    assert 'data-field="lease_timeout">30 <span class="muted">s</span>' in settings.text
    week = 'data-field="retention_succeeded">604800 <span class="muted">s (7 d 0 h)'
    assert week in settings.text
    token = csrf_of(settings.text)
    base = f"/admin/queues/mail/endpoints/{made['id']}"
    for url in (
        base + "/disable",
        base + "/secret",
        "/admin/queues/mail/settings",
        "/admin/queues/mail/purge",
    ):
        refused = await rig.web.post(
            url, data={"csrf": token, "confirm": "yes", "lease_timeout": "9"}
        )
        assert refused.status_code == 403, url
    listed = (await rig.api.get("/v1/queues/mail/endpoints")).json()["items"][0]
    assert listed["enabled"] is True
    assert (await rig.api.get("/v1/queues/mail")).json()["policy"]["lease_timeout"] == 30


async def test_bulk_cancel_and_delete_count_first_and_ask_for_a_confirmation(rig: Rig) -> None:
    await rig.api.patch("/v1/queues/mail", json={"paused": True})
    ids = []
    for owner in ("acme", "acme", "globex"):
        made = await rig.api.post("/v1/queues/mail/tasks", json={"name": "send", "owner": owner})
        ids.append(made.json()["id"])
    await sign_in(rig.web, ADMIN)
    tasks = await rig.web.get("/admin/tasks?queue=mail&owner=acme")
    assert "/admin/bulk/cancel?" in tasks.text
    ask = await rig.web.get("/admin/bulk/cancel?queue=mail&state=queued&owner=acme")
    assert ask.status_code == 200
    assert "<strong>2 tasks</strong> match" in ask.text
    form = {"queue": "mail", "state": "queued", "owner": "acme"}
    unconfirmed = await post(rig.web, "/admin/queues", "/admin/bulk/cancel", form)
    assert unconfirmed.status_code == 422
    done = await post(rig.web, "/admin/queues", "/admin/bulk/cancel", {**form, "confirm": "yes"})
    assert done.status_code == 303
    assert "requested=0" in done.headers["location"]
    notice = (await rig.web.get(done.headers["location"])).text
    assert "2 tasks cancelled; 0 running tasks asked to stop" in notice
    states = [(await rig.api.get(f"/v1/tasks/{i}")).json()["state"] for i in ids]
    assert states == ["cancelled", "cancelled", "queued"]

    assert (await rig.api.post(f"/v1/tasks/{ids[2]}/cancel")).status_code == 200
    cancelled = await rig.web.get("/admin/tasks?queue=mail&state=cancelled&owner=acme")
    assert "/admin/bulk/delete?" in cancelled.text
    ask = await rig.web.get("/admin/bulk/delete?queue=mail&state=cancelled&owner=acme")
    assert "<strong>2 tasks</strong> match" in ask.text
    assert (await rig.web.get("/admin/bulk/delete?queue=mail&state=queued")).status_code == 400
    form = {"queue": "mail", "state": "cancelled", "owner": "acme", "confirm": "yes"}
    done = await post(rig.web, "/admin/queues", "/admin/bulk/delete", form)
    assert done.status_code == 303
    assert "2 finished tasks deleted" in (await rig.web.get(done.headers["location"])).text
    found = [(await rig.api.get(f"/v1/tasks/{i}")).status_code for i in ids]
    assert found == [404, 404, 200]  # the other owner's cancelled task stays
    spare = (await rig.api.post("/v1/queues/mail/tasks", json={"name": "send"})).json()["id"]

    rig.web.cookies.clear()
    await sign_in(rig.web, READER)
    read_only = await rig.web.get("/admin/tasks?queue=mail")
    assert "/admin/bulk/" not in read_only.text
    ask = await rig.web.get("/admin/bulk/cancel?queue=mail&state=queued")
    assert 'action="/admin/bulk/cancel"' not in ask.text
    token = csrf_of(ask.text)
    form = {"csrf": token, "queue": "mail", "state": "queued", "confirm": "yes"}
    assert (await rig.web.post("/admin/bulk/cancel", data=form)).status_code == 403
    assert (await rig.api.get(f"/v1/tasks/{spare}")).json()["state"] == "queued"
