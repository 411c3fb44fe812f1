"""The admin UI's reads over many queues on a real Redis Cluster (three primaries), where
queues lie in several slots: the queues table's rows (one script call per queue, pipelined),
sorting by depth and the running and dead-letter pages over every queue (ZCARDs pipelined, since
a cluster refuses one script over several slots)."""

from __future__ import annotations

import re

import httpx

from tests.support import live_gateway

from .test_cluster_sessions import ADMIN, sign_in

QUEUES = [f"tenant-{i:02d}" for i in range(12)]  # more than the queues page shows as cards


async def test_the_queues_table_sorts_by_depth_and_pages_over_all_queues_on_a_cluster(
    cluster_url: str,
) -> None:
    async with (
        live_gateway(cluster_url, ADMIN) as (url, api),
        httpx.AsyncClient(base_url=url) as web,
    ):
        for name in QUEUES:
            assert (await api.put(f"/v1/queues/{name}", json={})).status_code == 201
        for name, n in (("tenant-07", 3), ("tenant-03", 1)):
            body = {"tasks": [{"name": "send"} for _ in range(n)]}
            assert (await api.post(f"/v1/queues/{name}/tasks/batch", json=body)).is_success
        assert (await sign_in(web, ADMIN)).status_code == 303
        page = await web.get("/admin/queues?sort=queued&dir=desc")
        assert page.status_code == 200
        rows = re.findall(r'<tr data-queue="([^"]+)"', page.text)
        deepest = ["tenant-07", "tenant-03"]
        assert rows == deepest + [q for q in QUEUES if q not in deepest]  # then by name
        row = page.text.split('data-queue="tenant-07"')[1].split("</tr>")[0]
        assert re.search(r'data-state="queued"><a [^>]*><span class="n">3</span>', row)
        for path in ("/admin/running", "/admin/deadletters"):
            answer = await web.get(path)
            assert answer.status_code == 200, path
            assert "Nothing is running" in answer.text or "No dead letters" in answer.text
