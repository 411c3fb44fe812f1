"""The claim script keeps push and pull apart: the dispatcher's claim never leases to a pull
endpoint, a lease request's claim never to a push endpoint nor to another pull endpoint; the
limits of pushes (endpoint concurrency, capabilities, queue concurrency) hold for pulls."""

from __future__ import annotations

from gateway.store.endpoint_records import EndpointRecord
from gateway.store.tasks import ClaimStatus
from sdk.wire import QueuePolicy

from .conftest import Stores
from .test_store import new_task, seed


async def add(
    s: Stores, endpoint_id: str, *, pull: bool, concurrency: int = 10, caps: list[str] | None = None
) -> None:
    await s.queues.add_endpoint(
        EndpointRecord(
            id=endpoint_id,
            queue="q",
            url="" if pull else "http://127.0.0.1:1/",
            pull=pull,
            concurrency=concurrency,
            capabilities=caps or [],
            secrets=["whsec_x"],
            created_ms=s.clock.now_ms(),
        )
    )


async def test_push_claim_skips_pull_endpoints_and_pull_claim_skips_push_ones(
    stores: Stores,
) -> None:
    now = stores.clock.now_ms()
    await stores.queues.put("q", QueuePolicy(), now)
    await add(stores, "puller", pull=True)
    await stores.tasks.enqueue("q", [new_task(now)], now)

    # Only a pull endpoint: the dispatcher finds no endpoint (and waits), the task stays.
    claim = await stores.tasks.claim("q", 10, seed(), now)
    assert claim.status is ClaimStatus.NOENDPOINT
    assert claim.leases == []

    await add(stores, "pusher", pull=False)
    # A pull claim naming the push endpoint, or an unknown one, gets nothing.
    for wrong in ("pusher", "nope"):
        claim = await stores.tasks.claim("q", 10, seed(), now, endpoint_id=wrong)
        assert claim.status is ClaimStatus.NOENDPOINT, wrong

    # The dispatcher's claim goes to the push endpoint only; the pull one gets the next task.
    claim = await stores.tasks.claim("q", 10, seed(), now)
    assert [lease.endpoint_id for lease in claim.leases] == ["pusher"]
    await stores.tasks.enqueue("q", [new_task(now)], now)
    claim = await stores.tasks.claim("q", 10, seed(), now, endpoint_id="puller")
    assert [lease.endpoint_id for lease in claim.leases] == ["puller"]
    assert (await stores.tasks.claim("q", 10, seed(), now)).status is ClaimStatus.EMPTY


async def test_pull_claim_takes_only_its_own_endpoint(stores: Stores) -> None:
    now = stores.clock.now_ms()
    await stores.queues.put("q", QueuePolicy(), now)
    await add(stores, "a", pull=True, concurrency=1)
    await add(stores, "b", pull=True, concurrency=5)
    await stores.tasks.enqueue("q", [new_task(now) for _ in range(4)], now)
    claim = await stores.tasks.claim("q", 10, seed(), now, endpoint_id="a")
    assert [lease.endpoint_id for lease in claim.leases] == ["a"]
    claim = await stores.tasks.claim("q", 10, seed(), now, endpoint_id="b")
    assert [lease.endpoint_id for lease in claim.leases] == ["b", "b", "b"]


async def test_pull_claim_keeps_endpoint_and_queue_concurrency(stores: Stores) -> None:
    now = stores.clock.now_ms()
    await stores.queues.put("q", QueuePolicy(max_concurrency=3), now)
    await add(stores, "puller", pull=True, concurrency=2)
    await stores.tasks.enqueue("q", [new_task(now) for _ in range(5)], now)
    first = await stores.tasks.claim("q", 10, seed(), now, endpoint_id="puller")
    assert len(first.leases) == 2  # the endpoint's concurrency
    claim = await stores.tasks.claim("q", 10, seed(), now, endpoint_id="puller")
    assert claim.status is ClaimStatus.NOENDPOINT  # no room on it

    await add(stores, "other", pull=True, concurrency=10)
    claim = await stores.tasks.claim("q", 10, seed(), now, endpoint_id="other")
    assert len(claim.leases) == 1  # the queue's concurrency: 3 running in all
    claim = await stores.tasks.claim("q", 10, seed(), now, endpoint_id="other")
    assert claim.status is ClaimStatus.FULL


async def test_pull_claim_keeps_capabilities(stores: Stores) -> None:
    now = stores.clock.now_ms()
    await stores.queues.put("q", QueuePolicy(), now)
    await add(stores, "cpu", pull=True)
    await add(stores, "gpu", pull=True, caps=["gpu"])
    gpu_task = new_task(now, capability="gpu")
    plain = new_task(now)
    await stores.tasks.enqueue("q", [gpu_task, plain], now)
    claim = await stores.tasks.claim("q", 10, seed(), now, endpoint_id="cpu")
    assert [lease.task_id for lease in claim.leases] == [plain.id]
    claim = await stores.tasks.claim("q", 10, seed(), now, endpoint_id="gpu")
    assert [lease.task_id for lease in claim.leases] == [gpu_task.id]
