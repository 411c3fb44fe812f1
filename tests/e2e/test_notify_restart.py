"""Completion callbacks survive a gateway killed mid-delivery: real gateway and worker
processes, a real Redis, and a receiver on loopback."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from standardwebhooks import Webhook

from sdk.wire import TaskNotice, TaskState

from .conftest import Cluster
from .test_e2e import ECHO, until

pytestmark = pytest.mark.e2e


@dataclass
class Receiver:
    """Records every POST; holds the first one unanswered until ``release`` is set."""

    got: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    url: str = ""


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["content-length"]))
            found.got.append((dict(self.headers.items()), body))
            if len(found.got) == 1:
                found.release.wait(30)
            try:
                self.send_response(204)
                self.end_headers()
            except OSError:
                pass  # the gateway that sent it is gone

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    found.url = f"http://127.0.0.1:{server.server_address[1]}/done"
    try:
        yield found
    finally:
        found.release.set()
        server.shutdown()
        server.server_close()


def test_a_notice_whose_gateway_is_killed_mid_delivery_is_delivered_by_the_next(
    cluster: Cluster, tmp_path: Path, receiver: Receiver
) -> None:
    from tests.support import free_port

    env = {"JOBGATE_NOTIFY_TIMEOUT": "1"}
    first = cluster.gateway(**env)
    client = cluster.client(first)
    client.put_queue("e2e")
    port = free_port()
    endpoint = client.add_endpoint("e2e", f"http://127.0.0.1:{port}/")
    cluster.worker(endpoint.secret, port, tmp_path / "pushes.jsonl")
    with cluster.api(0) as api:
        created = api.post(
            "/v1/queues/e2e/tasks",
            json={"name": ECHO, "payload": {"args": [7]}, "notify": receiver.url},
        )
        assert created.status_code == 201, created.text
        task_id = created.json()["id"]
        # The task ends; its notice goes out and the receiver holds it unanswered.
        until(lambda: receiver.got, what="the first delivery")
        assert api.get(f"/v1/tasks/{task_id}").json()["state"] == "succeeded"
    os.kill(cluster.procs[0].pid, signal.SIGKILL)
    cluster.procs[0].wait()
    receiver.release.set()

    second = cluster.gateway(**env)
    # The first gateway's lease on the notice (1 s timeout + 5 s margin) runs out, then the
    # second gateway claims and delivers it.
    until(lambda: len(receiver.got) >= 2, timeout=20, what="the delivery by the next gateway")
    with cluster.api(1) as api:
        secret = api.get("/v1/queues/e2e/notify-secret").json()["secret"]
        task = until(
            lambda: (
                (t := api.get(f"/v1/tasks/{task_id}").json())["notice"]["state"] == "delivered"
                and t
            ),
            what="the notice recorded as delivered",
        )
    assert second != first
    assert task["notice"]["tries"] == 2
    (held_headers, _), (headers, body) = receiver.got[:2]
    assert held_headers["webhook-id"] == headers["webhook-id"]  # one notice, twice
    Webhook(secret).verify(body, headers)
    notice = TaskNotice.model_validate_json(body)
    assert (notice.id, notice.state, notice.result, notice.attempt) == (
        task_id,
        TaskState.SUCCEEDED,
        7,
        1,
    )
