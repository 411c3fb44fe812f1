"""Which secrets sign a push around a rotation, one script call at a time with a manual clock:
chosen by the claim's exact time (milliseconds), and, after a rotation with no overlap, the new
one alone, even for a gateway whose clock lags a little behind. (Notices: test_notices.py.)"""

from __future__ import annotations

from gateway.services.queues import QueueService
from sdk.wire import SecretRotation

from .conftest import Stores
from .test_store import new_task, seed, setup_queue

FIRST = "whsec_x"  # setup_queue's endpoint secret
LAG = 5  # ms another gateway's clock may be behind the one that rotated


def service(s: Stores) -> QueueService:
    return QueueService(
        s.queues, s.tasks, s.clock, allow_private_endpoints=True, on_change=lambda q: None
    )


async def claimed_secrets(s: Stores, at: int) -> tuple[str, ...]:
    await s.tasks.enqueue("q", [new_task(at)], at)
    (lease,) = (await s.tasks.claim("q", 1, seed(), at)).leases
    return lease.secrets


async def test_a_claim_carries_the_previous_secret_until_the_overlaps_millisecond(
    stores: Stores,
) -> None:
    await setup_queue(stores)
    now = stores.clock.now_ms()
    assert await claimed_secrets(stores, now) == (FIRST,)
    rotated = await service(stores).rotate_secret("q", "ep1", SecretRotation(overlap=1.5))
    end = now + 1_500
    assert rotated.previous_secret_until is not None
    assert round(rotated.previous_secret_until.timestamp() * 1000) == end
    assert await claimed_secrets(stores, end - 1) == (rotated.secret, FIRST)
    assert await claimed_secrets(stores, end) == (rotated.secret,)


async def test_no_overlap_drops_the_previous_secret_at_once_for_every_clock(
    stores: Stores,
) -> None:
    await setup_queue(stores)
    now = stores.clock.now_ms()
    rotated = await service(stores).rotate_secret("q", "ep1", SecretRotation(overlap=0))
    assert rotated.previous_secret_until is None
    assert await claimed_secrets(stores, now - LAG) == (rotated.secret,)
