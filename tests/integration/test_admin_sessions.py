"""Admin UI sessions held in Redis (sign-out and revocation end them on the server) and sign-in
throttling, in-process against a real Redis."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from gateway.admin.headers import HEADERS
from gateway.app import create_app
from gateway.services import sessions as sessions_service
from gateway.settings import ApiKey, Settings
from gateway.store.scripts import Scripts
from gateway.store.sessions import SessionStore, SignInRules, Verdict
from tests.integration.test_admin import ADMIN, PRODUCER, READER, Rig, csrf_of, rig, sign_in

__all__ = ["rig"]  # the fixture, shared with test_admin

LOGIN_COOKIE = "jobgate_login"


async def paused(rig: Rig) -> bool:
    return bool((await rig.api.get("/v1/queues/mail")).json()["policy"]["paused"])


def browser(rig: Rig) -> httpx.AsyncClient:
    """Another browser (its own cookies) on the same gateway."""
    return httpx.AsyncClient(transport=rig.web._transport, base_url="http://gateway")


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url, decode_responses=True)
    yield client
    await client.aclose()


async def session_sets(redis: Redis) -> dict[str, dict[str, float]]:
    found = {}
    async for key in redis.scan_iter("jg:sessions:*"):
        found[key] = dict(await redis.zrange(key, 0, -1, withscores=True))
    return found


# --- sessions ---------------------------------------------------------------------------------


async def test_a_cookie_kept_after_sign_out_reads_and_changes_nothing(
    rig: Rig, redis: Redis
) -> None:
    await sign_in(rig.web, ADMIN)
    cookie = rig.web.cookies["jobgate_session"]
    token = csrf_of((await rig.web.get("/admin/queues")).text)
    [(key, members)] = (await session_sets(redis)).items()
    assert ADMIN not in key
    assert len(members) == 1
    assert 0 < await redis.pttl(key) <= 43_200_000  # the session's lifetime
    out = await rig.web.post("/admin/logout", data={"csrf": token})
    assert out.status_code == 303
    assert await session_sets(redis) == {}
    async with browser(rig) as thief:  # kept a copy of the cookie and the CSRF token
        thief.cookies.set("jobgate_session", cookie, path="/admin")
        page = await thief.get("/admin/queues")
        assert page.status_code == 303
        assert page.headers["location"].startswith("/admin/login")
        refused = await thief.post("/admin/queues/mail/pause", data={"csrf": token})
        assert refused.status_code == 303
        assert refused.headers["location"].startswith("/admin/login")
        # and the sign-in page does not send it on to a page that would send it back
        assert (await thief.get("/admin/login")).status_code == 200
    assert not await paused(rig)


async def test_an_admin_ends_every_session_of_a_key(rig: Rig, redis: Redis) -> None:
    async with browser(rig) as second, browser(rig) as admin_web:
        await sign_in(rig.web, READER)
        await sign_in(second, READER)
        await sign_in(admin_web, ADMIN)
        for client in (rig.web, second, admin_web):
            assert (await client.get("/admin/queues")).status_code == 200
        as_reader = await rig.api.delete(
            "/v1/keys/viewer/sessions", headers={"authorization": f"Bearer {READER}"}
        )
        assert as_reader.status_code == 403
        ended = await rig.api.delete("/v1/keys/viewer/sessions")
        assert ended.status_code == 200, ended.text
        assert ended.json() == {"key_name": "viewer", "ended": 2}
        for client in (rig.web, second):
            assert (await client.get("/admin/queues")).status_code == 303
        assert (await admin_web.get("/admin/queues")).status_code == 200  # another key's
        assert len(await session_sets(redis)) == 1
        again = await rig.api.delete("/v1/keys/viewer/sessions")
        assert again.json() == {"key_name": "viewer", "ended": 0}
        unknown = await rig.api.delete("/v1/keys/nobody/sessions")
        assert unknown.status_code == 404
        assert unknown.headers["content-type"] == "application/problem+json"
        # the key itself stays valid
        assert (await sign_in(rig.web, READER)).status_code == 303
        assert (await rig.web.get("/admin/queues")).status_code == 200


async def test_a_session_ends_when_its_key_loses_the_read_scope(rig: Rig, redis_url: str) -> None:
    await sign_in(rig.web, READER)
    assert (await rig.web.get("/admin/queues")).status_code == 200
    narrowed = Settings(
        redis_url=redis_url,
        api_keys=[
            ApiKey(key=ADMIN, scopes=["admin"], name="ops"),
            ApiKey(key=READER, scopes=["enqueue:*"], name="viewer"),
            ApiKey(key=PRODUCER, scopes=["enqueue:*"], name="producer"),
        ],
    )
    app = create_app(narrowed)  # the gateway restarted with the reader's scope narrowed
    async with app.router.lifespan_context(app) as state:

        async def with_state(scope: Any, receive: Any, send: Any) -> None:
            scope["state"] = dict(state)
            await app(scope, receive, send)

        transport = httpx.ASGITransport(app=with_state)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as web:
            web.cookies = rig.web.cookies
            answer = await web.get("/admin/queues")
            assert answer.status_code == 303
            assert answer.headers["location"].startswith("/admin/login")


# --- sign-in ----------------------------------------------------------------------------------


def _without_tokens(html: str) -> str:
    return re.sub(r'(name="csrf" value|name="csrf-token" content)="[^"]*"', "", html)


async def test_a_key_that_cannot_read_is_answered_as_an_unknown_key(rig: Rig) -> None:
    unknown = await sign_in(rig.web, "not-a-key-0123456789")
    narrow = await sign_in(rig.web, PRODUCER)
    assert narrow.status_code == unknown.status_code == 401
    assert _without_tokens(narrow.text) == _without_tokens(unknown.text)
    assert "Unknown API key" in narrow.text
    assert "jobgate_session" not in narrow.headers.get("set-cookie", "")


async def test_a_sign_in_form_serves_one_attempt(rig: Rig) -> None:
    form = await rig.web.get("/admin/login")
    data = {"csrf": csrf_of(form.text), "api_key": "not-a-key-0123456789"}
    nonce = rig.web.cookies[LOGIN_COOKIE]
    assert (await rig.web.post("/admin/login", data=data)).status_code == 401
    # the same form again, with its own cookie: spent, whatever the key
    rig.web.cookies.set(LOGIN_COOKIE, nonce, path="/admin/login")
    again = await rig.web.post("/admin/login", data={**data, "api_key": ADMIN})
    assert again.status_code == 403
    assert "jobgate_session" not in again.headers.get("set-cookie", "")
    assert "form expired" in again.text


async def _form(client: httpx.AsyncClient) -> tuple[str, str]:
    """A fresh sign-in form: its nonce (cookie) and its token."""
    answer = await client.get("/admin/login")
    return answer.cookies[LOGIN_COOKIE], csrf_of(answer.text)


async def _attempt(client: httpx.AsyncClient, nonce: str, token: str, key: str) -> httpx.Response:
    return await client.post(
        "/admin/login",
        data={"csrf": token, "api_key": key},
        headers={"cookie": f"{LOGIN_COOKIE}={nonce}"},
    )


LONG_WAITS = SignInRules(first_delay_ms=60_000)


@pytest.fixture
def long_waits(monkeypatch: pytest.MonkeyPatch) -> SignInRules:
    """The gateway's sign-in rules with a first wait of a minute, so that no machine is slow
    enough for a wait to run out during a test (the doubling in real milliseconds is
    test_sign_in_attempts_wait_longer_and_longer_then_reset's)."""
    monkeypatch.setattr(sessions_service, "SignInRules", lambda: LONG_WAITS)
    return LONG_WAITS


async def test_wrong_keys_sent_at_once_are_throttled_per_address(
    long_waits: SignInRules, rig: Rig
) -> None:
    rules = long_waits
    async with browser(rig) as attacker:
        forms = [await _form(attacker) for _ in range(50)]
        started = time.monotonic()
        answers = await asyncio.gather(
            *(_attempt(attacker, n, t, f"wrong-key-{i:012d}") for i, (n, t) in enumerate(forms))
        )
        assert time.monotonic() - started < rules.first_delay_ms / 1000
        statuses = [a.status_code for a in answers]
        assert set(statuses) == {401, 429}, statuses
        # Every attempt is counted before its key is checked: the free ones and one more (which
        # starts the delay) are checked at once, and the rest wait out the first delay.
        assert statuses.count(401) == rules.free + 1, statuses
        waiting = next(a for a in answers if a.status_code == 429)
        assert 1 <= int(waiting.headers["retry-after"]) <= rules.first_delay_ms // 1000
        assert "Too many sign-in attempts" in waiting.text
        # while the address waits, even the right key is not looked at
        nonce, token = await _form(attacker)
        blocked = await _attempt(attacker, nonce, token, ADMIN)
        assert blocked.status_code == 429
        assert "jobgate_session" not in blocked.headers.get("set-cookie", "")


async def test_sign_in_attempts_wait_longer_and_longer_then_reset(redis: Redis) -> None:
    scripts = Scripts(redis)
    await scripts.load()
    store = SessionStore(redis, scripts)
    rules = SignInRules(free=2, first_delay_ms=1_000, max_delay_ms=4_000, window_ms=60_000)
    now = 1_000_000
    nonces = iter(range(1000))

    async def attempt(at: int, address: str = "192.0.2.1") -> tuple[Verdict, int]:
        made = await store.attempt(f"nonce-{next(nonces)}", address, at, rules)
        return made.verdict, made.wait_ms

    assert await attempt(now) == (Verdict.GO, 0)
    assert await attempt(now) == (Verdict.GO, 0)
    assert await attempt(now) == (Verdict.GO, 0)  # the third: checked, and sets a 1 s wait
    assert await attempt(now + 400) == (Verdict.WAIT, 600)
    assert await attempt(now, "192.0.2.2") == (Verdict.GO, 0)  # another address
    now += 1_000
    assert await attempt(now) == (Verdict.GO, 0)  # sets 2 s
    assert await attempt(now + 1_999) == (Verdict.WAIT, 1)
    now += 2_000
    assert await attempt(now) == (Verdict.GO, 0)  # sets 4 s
    now += 4_000
    assert await attempt(now) == (Verdict.GO, 0)  # 8 s, capped at 4 s
    assert await attempt(now) == (Verdict.WAIT, 4_000)
    # a nonce serves once, whatever its attempt's outcome
    assert (await store.attempt("same", "198.51.100.7", now, rules)).verdict is Verdict.GO
    assert (await store.attempt("same", "198.51.100.7", now, rules)).verdict is Verdict.SPENT
    assert await redis.pttl("jg:{signin}:addr:192.0.2.1") <= rules.window_ms + 4_000
    await store.signed_in("192.0.2.1")  # a sign-in that succeeds forgets the attempts
    assert await attempt(now) == (Verdict.GO, 0)
    await store.open("fingerprint", "session-1", now, 60_000)
    left = [key async for key in redis.scan_iter("*")]
    assert len(left) > 3
    for key in left:  # nothing is kept for ever
        assert key.startswith(("jg:{signin}:", "jg:sessions:")), key
        assert 0 < await redis.pttl(key) <= rules.nonce_ms, key


async def test_a_failure_under_admin_is_a_page_with_the_security_headers(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    await sign_in(rig.web, ADMIN)

    async def unreachable(*args: object) -> bool:
        raise RedisConnectionError("connection refused")

    monkeypatch.setattr(SessionStore, "alive", unreachable)
    down = await rig.web.get("/admin/queues")
    assert down.status_code == 503
    assert down.headers["retry-after"] == "5"
    assert "cannot reach its Redis" in down.text

    async def broken(*args: object) -> bool:
        raise RuntimeError("secret detail")

    monkeypatch.setattr(SessionStore, "alive", broken)
    failed = await rig.web.get("/admin/queues")
    assert failed.status_code == 500
    assert "secret detail" not in failed.text
    for answer in (down, failed):
        assert answer.headers["content-type"].startswith("text/html")
        for name, value in HEADERS.items():
            assert answer.headers[name] == value, name


async def test_a_key_keeps_its_newest_open_sessions_only(
    redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripts = Scripts(redis)
    await scripts.load()
    store = SessionStore(redis, scripts)
    monkeypatch.setattr("gateway.store.sessions.MAX_SESSIONS_PER_KEY", 3)
    await store.open("fp", "ended", 0, 1_000)
    for i in range(4):
        await store.open("fp", f"s{i}", 2_000 + i, 60_000)
    assert not await store.alive("fp", "ended")  # past its expiry: dropped
    assert not await store.alive("fp", "s0")  # the oldest beyond the cap
    assert all([await store.alive("fp", f"s{i}") for i in (1, 2, 3)])
    await store.end("fp", "s2")
    assert not await store.alive("fp", "s2")
    assert await store.end_all("fp", 2_000) == 2
    assert await redis.exists("jg:sessions:fp") == 0
