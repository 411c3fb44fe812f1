"""Admin UI sessions and the sign-in throttle on a real Redis Cluster (three primaries): the
session sets, the sign-in script (two keys under one hash tag) and ending a key's sessions."""

from __future__ import annotations

import re

import httpx

from tests.support import live_gateway

ADMIN = "cluster-admin-key-0123456789"


async def sign_in(web: httpx.AsyncClient, key: str) -> httpx.Response:
    form = await web.get("/admin/login")
    found = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert found, form.text
    return await web.post("/admin/login", data={"csrf": found.group(1), "api_key": key})


async def test_sessions_end_and_sign_in_is_throttled_on_a_cluster(cluster_url: str) -> None:
    async with (
        live_gateway(cluster_url, ADMIN) as (url, api),
        httpx.AsyncClient(base_url=url) as web,
        httpx.AsyncClient(base_url=url) as other,
    ):
        assert (await sign_in(web, "wrong-key-0123456789")).status_code == 401
        assert (await sign_in(web, ADMIN)).status_code == 303
        assert (await sign_in(other, ADMIN)).status_code == 303
        assert (await web.get("/admin/queues")).status_code == 200
        page = await other.get("/admin/queues")
        token = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert token
        assert (await other.post("/admin/logout", data={"csrf": token.group(1)})).status_code == 303
        ended = await api.delete("/v1/keys/key-0/sessions")
        assert ended.json() == {"key_name": "key-0", "ended": 1}  # the other one signed out
        assert (await web.get("/admin/queues")).status_code == 303
        # 5 attempts at once, then waits doubling from 1 s: 20 attempts without a 429 would
        # take hours
        statuses = []
        for i in range(20):
            statuses.append((await sign_in(web, f"wrong-key-{i:012d}")).status_code)
            if statuses[-1] == 429:
                break
        assert statuses[-1] == 429, statuses
        assert set(statuses[:5]) == {401}, statuses
