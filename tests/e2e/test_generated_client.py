"""A client generated from the committed openapi.yaml by openapi-python-client, with the command
docs/api.md gives, works against a real gateway: every answer it gets is one the spec declares
(else it raises UnexpectedStatus)."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import ADMIN, ROOT, Cluster

pytestmark = pytest.mark.e2e
MINIMAL = "return=minimal"


def command() -> str:
    """The command docs/api.md gives ("Generating a client")."""
    text = (ROOT / "docs" / "api.md").read_text()
    section = text[text.index("## Generating a client") :]
    found = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert found, "docs/api.md gives the command"
    return found.group(1)


def generate(tmp: Path) -> Any:
    """The generated package ``jobgate_client``, made by docs/api.md's command in ``tmp`` (laid
    as the repository root: ``openapi.yaml`` and ``.venv``) and imported from there."""
    (tmp / "openapi.yaml").symlink_to(ROOT / "openapi.yaml")
    (tmp / ".venv").symlink_to(sys.prefix)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    run = subprocess.run(
        ["sh", "-ec", command()],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Warning" not in run.stdout + run.stderr, run.stdout + run.stderr
    sys.path.insert(0, str(tmp))
    try:
        return importlib.import_module("jobgate_client")
    finally:
        sys.path.remove(str(tmp))


def test_a_generated_client_works(cluster: Cluster, tmp_path: Path) -> None:
    gc = generate(tmp_path)
    from jobgate_client.api.endpoints import add_endpoint, list_endpoints
    from jobgate_client.api.queues import put_queue
    from jobgate_client.api.tasks import cancel_task, enqueue, enqueue_batch, get_task, list_tasks
    from jobgate_client.models import (
        BatchCreate,
        BatchReceipt,
        EndpointCreate,
        QueuePolicy,
        TaskCreate,
        TaskReceipt,
    )

    gateway = cluster.gateway()
    with gc.AuthenticatedClient(
        base_url=gateway, token=ADMIN, raise_on_unexpected_status=True
    ) as client:
        created = put_queue.sync_detailed("gen", client=client, body=QueuePolicy(max_attempts=3))
        assert created.status_code == 201
        replaced = put_queue.sync_detailed("gen", client=client, body=QueuePolicy(paused=True))
        assert replaced.status_code == 200
        assert replaced.parsed.policy.paused is True

        endpoint = add_endpoint.sync(
            "gen", client=client, body=EndpointCreate(url=f"{gateway}/healthz", concurrency=2)
        )
        assert endpoint.secret.startswith("whsec_")
        listed = list_endpoints.sync("gen", client=client)
        assert [e.id for e in listed.items] == [endpoint.id]

        payload = {"to": "ada@example.com"}
        task = enqueue.sync("gen", client=client, body=TaskCreate(name="mail", payload=payload))
        assert task.state.value == "queued"
        batch = enqueue_batch.sync(
            "gen",
            client=client,
            body=BatchCreate(tasks=[TaskCreate(name="mail"), TaskCreate(name="mail", delay=60)]),
        )
        assert [t.state.value for t in batch.tasks] == ["queued", "scheduled"]
        # Prefer: return=minimal: the answers are receipts, which the client reads as such.
        receipt = enqueue.sync("gen", client=client, body=TaskCreate(name="mail"), prefer=MINIMAL)
        assert isinstance(receipt, TaskReceipt)
        assert receipt.state.value == "queued"
        receipts = enqueue_batch.sync(
            "gen", client=client, body=BatchCreate(tasks=[TaskCreate(name="mail")]), prefer=MINIMAL
        )
        assert isinstance(receipts, BatchReceipt)
        assert [t.state.value for t in receipts.tasks] == ["queued"]

        got = get_task.sync(task.id, client=client)
        assert (got.id, got.payload) == (task.id, payload)
        page = list_tasks.sync("gen", client=client)
        assert {t.id for t in page.items} == {task.id, batch.tasks[0].id, receipt.id} | {
            t.id for t in receipts.tasks
        }

        cancelled = cancel_task.sync(task.id, client=client)
        assert cancelled.state.value == "cancelled"
        again = cancel_task.sync_detailed(task.id, client=client)
        assert again.status_code == 409  # declared, so parsed as a problem, not raised
        assert again.parsed.title == "Task finished"
