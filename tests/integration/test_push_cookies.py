"""The pushes' session keeps no cookies: one endpoint's ``Set-Cookie`` never rides on a later
push or notice to the same host (another queue's endpoint, another team's service behind the
same address)."""

from __future__ import annotations

from typing import Any

from gateway.dispatch.pusher import new_session
from tests.support import serve


async def test_a_cookie_an_endpoint_sets_is_not_sent_back() -> None:
    seen: list[str | None] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        headers = dict(scope["headers"])
        seen.append(headers.get(b"cookie", b"").decode() or None)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"set-cookie", b"session=team-a; Path=/")],
            }
        )
        await send({"type": "http.response.body", "body": b"null"})

    async with serve(app) as url:
        # By name: aiohttp's jar keeps no cookie of an IP-literal host in any case.
        url = url.replace("127.0.0.1", "localhost")
        session = new_session(allow_private=True)
        try:
            for path in ("/team-a", "/team-b", "/team-a"):
                async with session.post(url + path, data=b"{}") as response:
                    assert response.status == 200
        finally:
            await session.close()
    assert seen == [None, None, None]
