"""/readyz follows Redis: 503 while it is down, 200 again once it is back, without a restart."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from gateway.serving.redis_server import ManagedRedis
from tests.support import free_port

from .conftest import ADMIN, Cluster
from .test_e2e import until

pytestmark = pytest.mark.e2e


def test_readyz_is_503_while_redis_is_down_and_200_once_it_is_back(tmp_path: Path) -> None:
    # A Redis of this test's own, without persistence: when it comes back it has lost the Lua
    # scripts too, which the readiness check loads again.
    redis = ManagedRedis(tmp_path / "redis", port=free_port(), appendonly=False)
    redis.start()
    cluster = Cluster(redis.url, tmp_path)
    try:
        gateway = cluster.gateway()

        def ready(expected: int) -> httpx.Response | None:
            r = httpx.get(f"{gateway}/readyz", timeout=5)
            return r if r.status_code == expected else None

        up = until(lambda: ready(200), what="ready")
        assert up.json()["ready"] is True
        assert up.json()["checks"] == {"redis": "ok", "scripts": "ok", "loops": "ok"}

        redis.stop()
        down = until(lambda: ready(503), what="503 while Redis is down")
        body = down.json()
        assert body["ready"] is False
        assert body["checks"]["redis"] != "ok"
        assert body["checks"]["loops"] == "ok"
        assert down.headers["retry-after"] == "1"
        assert httpx.get(f"{gateway}/healthz").json() == {"status": "ok"}  # alive all the same

        redis.start()
        back = until(lambda: ready(200), what="200 once Redis is back")
        assert back.json()["checks"]["scripts"] == "ok"
        r = httpx.put(
            f"{gateway}/v1/queues/after",
            json={},
            headers={"authorization": f"Bearer {ADMIN}"},
        )
        assert r.status_code == 201, r.text  # the scripts are back: state changes work again
    finally:
        cluster.stop()
        redis.stop()
