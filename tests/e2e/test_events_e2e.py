"""Events fanned out to triggers through two real gateway processes, one SIGKILLed while events
are in flight: the producer sends every event it got no answer for again, with the same id, to
the gateway still alive (as docs/events.md tells producers to), and each (event, trigger) pair
ends as exactly one task."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from gateway.core.ids import derived_id
from tests.e2e.conftest import ADMIN, Cluster

pytestmark = pytest.mark.e2e

EVENTS = 1_000
QUEUES = ("mail", "crm", "audit")
IN_FLIGHT = 24
KILL_AFTER = 300  # answered events before the first gateway is killed


async def produce(
    gateways: list[str], kill: asyncio.Event, retried: set[str]
) -> dict[str, dict[str, object]]:
    """Send every event once answered; an event whose gateway did not answer (killed, or
    refusing connections since) goes again, with its id, to the other gateway (``retried``
    gets its id)."""
    answers: dict[str, dict[str, object]] = {}
    limit = asyncio.Semaphore(IN_FLIGHT)
    headers = {"authorization": f"Bearer {ADMIN}"}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:

        async def send(n: int) -> None:
            event = {"name": "user.created", "id": f"user-{n}", "data": {"user": n}}
            target = n % 2
            async with limit:
                for _ in range(20):
                    try:
                        r = await http.post(f"{gateways[target]}/v1/events", json=event)
                    except httpx.TransportError:
                        r = None
                    if r is not None and r.status_code in (200, 201):
                        answers[event["id"]] = r.json()  # type: ignore[index]
                        if len(answers) == KILL_AFTER:
                            kill.set()
                        return
                    retried.add(str(event["id"]))
                    target = 1 - target  # the other gateway, with the same id
                    await asyncio.sleep(0.05)
                raise AssertionError(f"event {n} was never answered")

        await asyncio.gather(*(send(n) for n in range(EVENTS)))
    return answers


def test_events_through_two_gateways_with_a_sigkill_make_one_task_per_trigger(
    cluster: Cluster,
) -> None:
    gateways = [cluster.gateway(), cluster.gateway()]
    doomed = cluster.procs[0]
    with cluster.api(1) as api:
        for queue in QUEUES:
            assert api.put(f"/v1/queues/{queue}", json={}).status_code == 201
            body = {"event": "user.created", "queue": queue, "task": "welcome"}
            assert api.put(f"/v1/triggers/on-{queue}", json=body).status_code == 201

    retried: set[str] = set()

    async def run() -> dict[str, dict[str, object]]:
        kill = asyncio.Event()

        async def killer() -> None:
            await kill.wait()
            doomed.kill()  # SIGKILL, events in flight on it

        killing = asyncio.create_task(killer())
        answers = await produce(gateways, kill, retried)
        await killing
        return answers

    started = time.monotonic()
    answers = asyncio.run(run())
    took = time.monotonic() - started
    assert doomed.poll() is not None
    assert len(answers) == EVENTS
    assert retried  # some events were in flight on the killed gateway, or sent to it after
    expected: set[str] = set()
    for event_id, answer in answers.items():
        ms = int(answer["accepted_ms"])  # type: ignore[call-overload]
        made = {t["by"]: t["id"] for t in answer["started"]}  # type: ignore[attr-defined]
        derived = {f"on-{q}": derived_id(ms, event_id, f"on-{q}") for q in QUEUES}
        assert made == derived, (event_id, answer)
        expected |= set(derived.values())
    assert len(expected) == 3 * EVENTS
    with cluster.api(1) as api:
        found: set[str] = set()
        for queue in QUEUES:
            counts = api.get(f"/v1/queues/{queue}").json()["counts"]
            assert sum(counts.values()) == EVENTS, (queue, counts)
            cursor = None
            while True:
                params = {"state": "queued", "limit": 500, **({"cursor": cursor} if cursor else {})}
                page = api.get(f"/v1/queues/{queue}/tasks", params=params).json()
                found |= {t["id"] for t in page["items"]}
                cursor = page.get("next_cursor")
                if not cursor:
                    break
        assert found == expected
        # Nothing is left pending: each event killed half way was finished by its repeat.
        listed = api.get("/v1/events", params={"limit": 500}).json()["items"]
        assert {e["state"] for e in listed} == {"done"}
    print(f"{EVENTS} events x 3 triggers, 2 gateways, {len(retried)} sent again: {took:.1f} s")
