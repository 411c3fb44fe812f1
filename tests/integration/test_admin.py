"""The admin UI in-process against a real Redis: sign-in, sessions, CSRF, scopes, and what the
pages show. (The browser tests in ``tests/browser`` drive the same pages in Chromium.)"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from gateway.admin.headers import CONTENT_SECURITY_POLICY, HEADERS
from gateway.app import create_app
from gateway.settings import ApiKey, Settings
from tests.support import free_port, until

ADMIN = "admin-ui-admin-key-0123"
READER = "admin-ui-reader-key-012"
PRODUCER = "admin-ui-producer-key-0"


@dataclass
class Rig:
    api: httpx.AsyncClient  # the JSON API, as admin
    web: httpx.AsyncClient  # a browser: cookies, no Authorization header


@pytest.fixture
async def rig(redis_url: str) -> AsyncIterator[Rig]:
    settings = Settings(
        redis_url=redis_url,
        allow_private_endpoints=True,
        api_keys=[
            ApiKey(key=ADMIN, scopes=["admin"], name="ops"),
            ApiKey(key=READER, scopes=["read"], name="viewer"),
            ApiKey(key=PRODUCER, scopes=["enqueue:*"], name="producer"),
        ],
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app) as state:

        async def with_state(scope: Any, receive: Any, send: Any) -> None:
            scope["state"] = dict(state)
            await app(scope, receive, send)

        transport = httpx.ASGITransport(app=with_state)
        async with (
            httpx.AsyncClient(
                transport=transport,
                base_url="http://gateway",
                headers={"authorization": f"Bearer {ADMIN}"},
            ) as api,
            httpx.AsyncClient(transport=transport, base_url="http://gateway") as web,
        ):
            assert (await api.put("/v1/queues/mail", json={})).status_code == 201
            yield Rig(api, web)


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "no CSRF field in the page"
    return found.group(1)


async def sign_in(web: httpx.AsyncClient, key: str, next_page: str = "") -> httpx.Response:
    form = await web.get("/admin/login" + (f"?next={next_page}" if next_page else ""))
    assert form.status_code == 200
    data = {"csrf": csrf_of(form.text), "api_key": key, "next": next_page or "/admin/queues"}
    return await web.post("/admin/login", data=data)


async def paused(rig: Rig) -> bool:
    return bool((await rig.api.get("/v1/queues/mail")).json()["policy"]["paused"])


async def test_a_page_without_a_session_redirects_to_sign_in(rig: Rig) -> None:
    answer = await rig.web.get("/admin/tasks?queue=mail")
    assert answer.status_code == 303
    assert answer.headers["location"] == "/admin/login?next=%2Fadmin%2Ftasks%3Fqueue%3Dmail"
    live = await rig.web.get("/admin/queues", headers={"hx-request": "true"})
    assert live.status_code == 401
    assert live.headers["hx-redirect"].startswith("/admin/login?next=")
    # a forged cookie is no session either
    rig.web.cookies.set("jobgate_session", "eyJrIjoiIn0.AAAA", path="/admin")
    assert (await rig.web.get("/admin/queues")).status_code == 303
    assert (await rig.web.get("/admin")).status_code in (303, 307)


async def test_sign_in_sets_a_strict_httponly_session_and_returns_to_the_page(rig: Rig) -> None:
    answer = await sign_in(rig.web, ADMIN, "/admin/running")
    assert answer.status_code == 303
    assert answer.headers["location"] == "/admin/running"
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith("jobgate_session=")
    for attribute in ("HttpOnly", "Path=/admin", "SameSite=strict", "Max-Age=43200"):
        assert attribute.lower() in cookie.lower(), attribute
    assert "secure" not in cookie.lower()  # plain http here
    page = await rig.web.get("/admin/queues")
    assert page.status_code == 200
    assert page.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert "script-src 'self'" in CONTENT_SECURITY_POLICY
    assert page.headers["cache-control"] == "no-store"
    assert 'data-queue="mail"' in page.text
    assert "ops" in page.text
    assert "<script>" not in page.text
    assert "style=" not in page.text


async def test_sign_in_refuses_wrong_keys_a_missing_token_and_keys_that_cannot_read(
    rig: Rig,
) -> None:
    wrong = await sign_in(rig.web, "not-a-key-0123456789")
    assert wrong.status_code == 401
    assert "Unknown API key" in wrong.text
    assert "jobgate_session" not in wrong.headers.get("set-cookie", "")
    producer = await sign_in(rig.web, PRODUCER)  # as an unknown key: test_admin_sessions.py
    assert producer.status_code == 401
    assert "jobgate_session" not in producer.headers.get("set-cookie", "")
    no_token = await rig.web.post("/admin/login", data={"api_key": ADMIN})
    assert no_token.status_code == 403
    assert "jobgate_session" not in no_token.headers.get("set-cookie", "")


async def test_every_admin_answer_carries_the_security_headers_and_no_echo(rig: Rig) -> None:
    marker = "echo-me-%3Cb%3E"
    answers = {
        "unknown page": await rig.web.get(f"/admin/{marker}"),
        "wrong method": await rig.web.get(f"/admin/logout?{marker}"),
        "missing static file": await rig.web.get(f"/admin/static/{marker}.css"),
        "unknown page, signed out POST": await rig.web.post(f"/admin/{marker}/x"),
    }
    await sign_in(rig.web, ADMIN)
    answers["unknown page, signed in"] = await rig.web.get(f"/admin/{marker}")
    answers["a page's own error"] = await rig.web.get(f"/admin/tasks/{marker}")
    for what, answer in answers.items():
        assert answer.status_code in (400, 404, 405), what
        for name, value in HEADERS.items():
            assert answer.headers.get(name) == value, (what, name)
        assert "echo-me" not in answer.text, what
        assert "<b>" not in answer.text, what
        assert answer.headers["content-type"].startswith("text/html"), what
    assert answers["wrong method"].status_code == 405
    assert answers["wrong method"].headers["allow"] == "POST"


async def test_a_post_without_the_csrf_token_changes_nothing(rig: Rig) -> None:
    await sign_in(rig.web, ADMIN)
    page = await rig.web.get("/admin/queues")
    token = csrf_of(page.text)
    for data, headers in (({}, {}), ({"csrf": "forged"}, {}), ({}, {"x-csrf-token": "x"})):
        refused = await rig.web.post("/admin/queues/mail/pause", data=data, headers=headers)
        assert refused.status_code == 403
        assert not await paused(rig)
    # another session's token does not do either
    async with httpx.AsyncClient(transport=rig.web._transport, base_url="http://gateway") as other:
        await sign_in(other, ADMIN)
        other_token = csrf_of((await other.get("/admin/queues")).text)
    assert other_token != token
    refused = await rig.web.post("/admin/queues/mail/pause", data={"csrf": other_token})
    assert refused.status_code == 403
    assert not await paused(rig)
    done = await rig.web.post("/admin/queues/mail/pause", data={"csrf": token})
    assert done.status_code == 303
    assert await paused(rig)
    page = await rig.web.get(done.headers["location"])
    assert "Queue paused" in page.text
    assert 'class="badge paused"' in page.text
    done = await rig.web.post("/admin/queues/mail/resume", headers={"x-csrf-token": token})
    assert done.status_code == 303
    assert not await paused(rig)


async def test_a_read_only_key_sees_but_cannot_change(rig: Rig) -> None:
    task = (await rig.api.post("/v1/queues/mail/tasks", json={"name": "send"})).json()
    await sign_in(rig.web, READER)
    queues = await rig.web.get("/admin/queues")
    assert queues.status_code == 200
    assert "read-only" in queues.text
    assert "/pause" not in queues.text
    detail = await rig.web.get(f"/admin/tasks/{task['id']}")
    assert detail.status_code == 200
    assert "/cancel" not in detail.text
    token = csrf_of(queues.text)  # the sign-out form's
    for path in (
        "/admin/queues/mail/pause",
        f"/admin/tasks/{task['id']}/cancel",
        f"/admin/tasks/{task['id']}/retry",
        "/admin/deadletters/resubmit",
    ):
        refused = await rig.web.post(path, data={"csrf": token, "all": "1"})
        assert refused.status_code == 403, path
    assert not await paused(rig)
    state = (await rig.api.get(f"/v1/tasks/{task['id']}")).json()["state"]
    assert state == "queued"


async def test_sign_out_ends_the_session(rig: Rig) -> None:
    await sign_in(rig.web, ADMIN)
    token = csrf_of((await rig.web.get("/admin/queues")).text)
    out = await rig.web.post("/admin/logout", data={"csrf": token})
    assert out.status_code == 303
    assert (
        'jobgate_session=""' in out.headers["set-cookie"]
        or "Max-Age=0" in out.headers["set-cookie"]
    )
    assert (await rig.web.get("/admin/queues")).status_code == 303


async def test_tasks_page_filters_pages_and_renders_the_live_part_alone(rig: Rig) -> None:
    body = {"tasks": [{"name": "send", "owner": f"o{i % 2}"} for i in range(7)]}
    body["tasks"] += [{"name": "other"}]
    created = (await rig.api.post("/v1/queues/mail/tasks/batch", json=body)).json()["tasks"]
    await sign_in(rig.web, ADMIN)
    everything = await rig.web.get("/admin/tasks?queue=mail&state=queued")
    assert everything.text.count("data-task=") == 8
    owner = await rig.web.get("/admin/tasks?queue=mail&state=queued&name=send&owner=o1")
    assert owner.text.count("data-task=") == 3
    live = await rig.web.get(
        "/admin/tasks?queue=mail&state=queued&name=other", headers={"hx-request": "true"}
    )
    assert live.text.lstrip().startswith('<div id="tasks"')
    assert "<html" not in live.text
    assert live.text.count("data-task=") == 1
    assert created[-1]["id"] in live.text
    bad = await rig.web.get("/admin/tasks?queue=mail&state=nonsense")
    assert bad.status_code == 400
    missing = await rig.web.get("/admin/tasks/01ARZ3NDEKTSV4RRFFQ69G5FAV")
    assert missing.status_code == 404


async def test_cancel_from_the_task_page(rig: Rig) -> None:
    task = (await rig.api.post("/v1/queues/mail/tasks", json={"name": "send"})).json()
    await sign_in(rig.web, ADMIN)
    page = await rig.web.get(f"/admin/tasks/{task['id']}")
    done = await rig.web.post(
        f"/admin/tasks/{task['id'].lower()}/cancel", data={"csrf": csrf_of(page.text)}
    )
    assert done.status_code == 303
    assert (await rig.api.get(f"/v1/tasks/{task['id']}")).json()["state"] == "cancelled"
    again = await rig.web.post(
        f"/admin/tasks/{task['id']}/cancel", data={"csrf": csrf_of(page.text)}
    )
    assert again.status_code == 409
    assert "already ended" in again.text


async def dead_tasks(rig: Rig, queue: str, n: int, **fields: Any) -> list[str]:
    """``n`` dead tasks: one attempt each, pushed to a loopback port nobody listens on. The
    queue is paused afterwards, so resubmitted tasks stay queued where the test can see them."""
    await rig.api.put(f"/v1/queues/{queue}", json={"max_attempts": 1})
    url = f"http://127.0.0.1:{free_port()}/"
    assert (await rig.api.post(f"/v1/queues/{queue}/endpoints", json={"url": url})).is_success
    body = {"tasks": [{"name": "send", **fields} for _ in range(n)]}
    created = (await rig.api.post(f"/v1/queues/{queue}/tasks/batch", json=body)).json()["tasks"]

    async def all_dead() -> bool:
        found = await rig.api.get("/v1/deadletters", params={"queue": queue})
        return len(found.json()["items"]) == n

    await until(all_dead, timeout=20, what=f"{n} dead tasks in {queue}")
    await rig.api.patch(f"/v1/queues/{queue}", json={"paused": True})
    return [t["id"] for t in created]


async def states(rig: Rig, ids: list[str]) -> list[str]:
    return [(await rig.api.get(f"/v1/tasks/{i}")).json()["state"] for i in ids]


async def test_dead_letters_resubmit_selected_all_matching_and_one_from_its_page(
    rig: Rig,
) -> None:
    one = await dead_tasks(rig, "dl-one", 3, owner="acme")
    other = await dead_tasks(rig, "dl-two", 2, owner="zeta")
    await sign_in(rig.web, ADMIN)
    page = await rig.web.get("/admin/deadletters?owner=acme")
    assert page.text.count("data-task=") == 3
    token = csrf_of(page.text)
    # the ticked boxes only
    picked = await rig.web.post(
        "/admin/deadletters/resubmit",
        data={"csrf": token, "ids": [one[0], other[0].lower()], "owner": "acme"},
    )
    assert picked.status_code == 303
    assert picked.headers["location"].startswith("/admin/deadletters?owner=acme&notice=")
    shown = await rig.web.get(picked.headers["location"])
    assert "2 tasks queued again; 0 skipped" in shown.text
    assert await states(rig, one) == ["queued", "dead", "dead"]
    assert await states(rig, other) == ["queued", "dead"]
    # every dead letter matching the filter: owner acme's, not zeta's
    everything = await rig.web.post(
        "/admin/deadletters/resubmit", data={"csrf": token, "all": "1", "owner": "acme"}
    )
    assert "notice=resubmitted&n=2&skipped=0" in everything.headers["location"]
    assert await states(rig, one) == ["queued"] * 3
    assert await states(rig, other) == ["queued", "dead"]
    # nothing ticked: said so, nothing moves
    nothing = await rig.web.post("/admin/deadletters/resubmit", data={"csrf": token})
    assert nothing.status_code == 422
    # the last one from its own page; a second click finds it no longer dead
    task_page = await rig.web.get(f"/admin/tasks/{other[1]}")
    assert "/retry" in task_page.text
    again = await rig.web.post(f"/admin/tasks/{other[1]}/retry", data={"csrf": token})
    assert again.headers["location"].endswith("notice=resubmitted&n=1&skipped=0")
    assert await states(rig, other) == ["queued", "queued"]
    twice = await rig.web.post(f"/admin/tasks/{other[1]}/retry", data={"csrf": token})
    assert twice.headers["location"].endswith("notice=resubmitted&n=0&skipped=1")


async def test_queues_page_shows_depths_and_the_last_minutes_throughput(rig: Rig) -> None:
    await dead_tasks(rig, "dl-one", 2)
    await sign_in(rig.web, ADMIN)
    page = await rig.web.get("/admin/queues")
    card = page.text.split('data-queue="dl-one"')[1].split("</section>")[0]
    assert re.search(r'data-state="dead">\s*<span class="n">2</span>', card)
    assert "0 succeeded, 2 dead in 10 min" in card
    assert card.count("<rect") == 10
    assert card.count('class="with-failures"') == 1


async def test_every_page_names_its_icon_and_the_icon_is_served(rig: Rig) -> None:
    """Without an icon of its own a page makes the browser ask for /favicon.ico, a 404 on
    every admin page (issue 31)."""
    page = await rig.web.get("/admin/login")
    found = re.search(r'<link rel="icon" type="image/svg\+xml" href="([^"]+)">', page.text)
    assert found, "the page names no icon"
    icon = await rig.web.get(found.group(1))
    assert icon.status_code == 200
    assert icon.headers["content-type"].startswith("image/svg+xml")
    assert icon.text.startswith("<svg")
