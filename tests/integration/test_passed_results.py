"""pass_results in the store: a claimed dependent carries its dependencies' results, read after
the claim from each dependency's queue, in depends_on order and capped in size."""

from __future__ import annotations

import json
import secrets

from gateway.dispatch.pusher import push_body
from gateway.store.dependencies import DependencyStore
from gateway.store.passed_results import results_json
from gateway.store.scripts import Scripts
from gateway.store.tasks import Finish
from sdk.wire import AttemptOutcome, PushBody, TaskState
from sdk.wire.pushes import MAX_PASSED_RESULTS

from .conftest import Stores
from .test_flow_control import queue, task


async def finish(s: Stores, q: str, results: dict[str, str]) -> None:
    """Claim the ready tasks of ``q`` and end each with its result JSON from ``results``."""
    claim = await s.tasks.claim(q, 1000, secrets.token_hex(8), s.clock.now_ms())
    ends = [
        Finish(x.task_id, x.token, AttemptOutcome.SUCCEEDED, text=results[x.task_id])
        for x in claim.leases
    ]
    assert len(ends) == len(results)
    await s.tasks.finish_many(q, ends, s.clock.now_ms())


async def test_a_dependent_gets_the_results_in_depends_on_order(stores: Stores) -> None:
    await queue(stores)
    now = stores.clock.now_ms()
    a, b = task(now), task(now)
    plain = task(now, depends_on=(a.id,))
    asking = task(now, depends_on=(b.id, a.id), results_from=(("q", b.id), ("q", a.id)))
    await stores.tasks.enqueue("q", [a, b, plain, asking], now)
    await finish(stores, "q", {a.id: '{"n": 1}', b.id: "[2, 3]"})
    claim = await stores.tasks.claim("q", 10, "s", stores.clock.now_ms())
    leases = {lease.task_id: lease for lease in claim.leases}
    assert set(leases) == {plain.id, asking.id}
    # A task that does not ask: nothing read, no field.
    assert leases[plain.id].results_json is None
    assert "results" not in json.loads(push_body(leases[plain.id]))
    body = PushBody.model_validate_json(push_body(leases[asking.id]))
    assert body.results is not None
    assert [(r.id, r.result, r.truncated) for r in body.results] == [
        (b.id, [2, 3], False),
        (a.id, {"n": 1}, False),
    ]


async def test_results_come_from_a_dependency_in_another_queue(stores: Stores) -> None:
    await queue(stores, "a")
    await queue(stores, "b")
    deps = DependencyStore(stores.redis, Scripts(stores.redis))
    now = stores.clock.now_ms()
    upstream = task(now)
    await stores.tasks.enqueue("a", [upstream], now)
    downstream = task(
        now,
        depends_on=(upstream.id,),
        cross_deps=(("a", upstream.id),),
        results_from=(("a", upstream.id),),
    )
    await stores.tasks.enqueue("b", [downstream], now)
    await deps.link("b", [(downstream.id, "a", upstream.id)], now)
    await finish(stores, "a", {upstream.id: '"from a"'})
    await deps.deliver("a", now)
    (lease,) = (await stores.tasks.claim("b", 10, "s", stores.clock.now_ms())).leases
    assert json.loads(push_body(lease))["results"] == [{"id": upstream.id, "result": "from a"}]
    record = await stores.tasks.record("b", downstream.id)
    assert record is not None
    assert record["state"] == TaskState.RUNNING


async def test_results_past_the_cap_are_marked_truncated(stores: Stores) -> None:
    await queue(stores)
    now = stores.clock.now_ms()
    big = json.dumps("x" * (MAX_PASSED_RESULTS // 2 + 10))
    deps = [task(now) for _ in range(3)]
    asking = task(
        now, depends_on=tuple(d.id for d in deps), results_from=tuple(("q", d.id) for d in deps)
    )
    await stores.tasks.enqueue("q", [*deps, asking], now)
    await finish(stores, "q", {deps[0].id: big, deps[1].id: big, deps[2].id: "7"})
    (lease,) = (await stores.tasks.claim("q", 10, "s", stores.clock.now_ms())).leases
    body = PushBody.model_validate_json(push_body(lease))
    assert body.results is not None
    assert [r.truncated for r in body.results] == [False, True, False]
    assert body.results[1].result is None
    assert body.results[2].result == 7


def test_a_result_that_is_gone_is_passed_as_null() -> None:
    text = results_json([("q", "a"), ("q", "b")], {("q", "a"): "1"})
    assert json.loads(text) == [{"id": "a", "result": 1}, {"id": "b", "result": None}]


async def test_a_member_matched_by_its_dedup_key_passes_the_earlier_tasks_result(
    stores: Stores,
) -> None:
    await queue(stores, dedup_window=60)
    now = stores.clock.now_ms()
    earlier = task(now, dedup_key="k")
    await stores.tasks.enqueue("q", [earlier], now)
    again = task(now, dedup_key="k")
    asking = task(now, depends_on=(again.id,), results_from=(("q", again.id),))
    stored = await stores.tasks.enqueue("q", [again, asking], now)
    assert stored[0].duplicate_of == earlier.id
    record = await stores.tasks.record("q", asking.id)
    assert record is not None
    assert record["deps"] == [earlier.id]  # shown as depending on the task that exists
    await finish(stores, "q", {earlier.id: '"first"'})
    claim = await stores.tasks.claim("q", 10, "s", stores.clock.now_ms())
    (lease,) = claim.leases
    body = PushBody.model_validate_json(push_body(lease))
    assert body.results is not None
    assert [(r.id, r.result) for r in body.results] == [(earlier.id, "first")]
