"""Per-key rate limits end to end: a real gateway process pushing to a real SDK worker, which
records when each push arrives."""

from __future__ import annotations

from pathlib import Path

from sdk import TaskCreate

from .conftest import Cluster, pushes
from .test_e2e import ECHO, setup, until

PER_SECOND = 5
FLOOD = 16


def test_one_customer_is_held_to_its_rate_while_others_go_at_once(
    cluster: Cluster, tmp_path: Path
) -> None:
    s = setup(
        cluster,
        tmp_path,
        key_rate_limit={"path": "args.0.customer", "per_second": PER_SECOND, "burst": 1},
    )
    flood = [
        TaskCreate(name=ECHO, payload={"args": [{"customer": "A", "i": i}]}) for i in range(FLOOD)
    ]
    # Behind the flood in the queue: 40 customers with one task each.
    others = [TaskCreate(name=ECHO, payload={"args": [{"customer": f"B{i}"}]}) for i in range(40)]
    created = s.client.enqueue_batch("e2e", [*flood, *others])
    flood_ids = {t.id for t in created[:FLOOD]}
    until(lambda: len(pushes(s.log)) >= FLOOD + 40, timeout=30, what="every push")
    log = pushes(s.log)
    assert sorted(p["id"] for p in log) == sorted(t.id for t in created)  # one push each
    # The limit is on dispatches: read when each task was claimed (its attempt's start, by
    # Redis's clock), not when the push arrived, which a loaded machine bunches up.
    started = {t.id: s.client.get_task(t.id).attempts[0].started_at.timestamp() for t in created}
    a = sorted(started[i] for i in flood_ids)
    b = sorted(t for i, t in started.items() if i not in flood_ids)
    # No faster than the limit: j - i pushes after the i-th need (j - i) / 5 s, less one for the
    # burst and a little for the dispatcher's timer.
    for i in range(FLOOD):
        for j in range(i + 1, FLOOD):
            assert a[j] - a[i] >= (j - i - 1) / PER_SECOND - 0.05, (i, j, a[j] - a[i])
    # And not held much longer than it (generous: the machine is shared).
    assert a[-1] - a[0] <= (FLOOD - 1) / PER_SECOND + 3.0
    # The other customers were not queued behind A: all of them went before A was half done.
    assert b[-1] < a[FLOOD // 2], (b[-1] - a[0], a[FLOOD // 2] - a[0])


def test_a_task_enqueued_while_another_key_is_held_goes_at_once(
    cluster: Cluster, tmp_path: Path
) -> None:
    """A claim that leased nothing only because of per-key buckets answers a 'held' RATE: the
    dispatcher waits for the bucket's time or for new work, so a task of another key enqueued
    meanwhile is not kept waiting for the held key's next token (10 s here)."""
    s = setup(
        cluster, tmp_path, key_rate_limit={"path": "args.0.customer", "per_second": 0.1, "burst": 1}
    )
    held = [TaskCreate(name=ECHO, payload={"args": [{"customer": "A", "i": i}]}) for i in range(2)]
    first, second = s.client.enqueue_batch("e2e", held)
    until(lambda: any(p["id"] == first.id for p in pushes(s.log)), what="A's first push")
    other = s.client.enqueue("e2e", ECHO, {"args": [{"customer": "B"}]})
    done = s.client.wait(other.id, timeout=3)  # before A's next token (10 s) or a re-check (5 s)
    assert done.state.value == "succeeded"
    assert all(p["id"] != second.id for p in pushes(s.log))  # A's second is still held
