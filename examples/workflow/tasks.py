"""The workflow example's tasks: an order is priced, then fulfilled in durable steps.

``price_order`` and ``fulfil_order`` run as a chain (``producer.py``): the price is passed on
as ``fulfil_order``'s first argument. ``fulfil_order`` charges the card, waits for the payment
to settle, waits for someone to approve the order, and ships, each part a step recorded with
the task, so a retry never charges twice:

- ``charge`` runs once per task; its recorded result (which attempt charged) is what every
  later attempt gets back.
- ``settlement`` is a durable sleep: the attempt ends, no worker waits, no attempt is spent,
  and the task is pushed again once the payment has settled.
- ``approval`` waits for the event ``order.approved`` of this order (``POST /v1/events``, or
  ``client.send_event``): like the sleep, the attempt ends and no worker waits; the event's
  data comes back as the step's result. Nobody approving within ``APPROVAL_TIMEOUT`` fails the
  order.
- ``ship`` calls a carrier whose first call times out (a simulated outage): the attempt fails,
  and the retry replays ``charge``, ``settlement`` and ``approval`` and ships.

Both scripts import this module, so the task names (``tasks.price_order``, ...) match.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sdk import AsyncContext, Fail, task

SETTLEMENT = timedelta(seconds=2)
APPROVAL_TIMEOUT = timedelta(minutes=10)
PRICES = {"tea": 4.5, "mug": 12.0, "kettle": 39.0}


@task(queue="orders")
def price_order(order: dict[str, Any]) -> dict[str, Any]:
    """The order with its total."""
    total = sum(PRICES[item] * count for item, count in order["items"].items())
    return {"id": order["id"], "items": order["items"], "total": round(total, 2)}


def charge_card(order_id: str, total: float, attempt: int) -> dict[str, Any]:
    """The payment provider (simulated): charge once, return the payment."""
    return {"payment": f"pay_{order_id}", "amount": total, "attempt": attempt}


def ship(order_id: str, attempt: int) -> dict[str, Any]:
    """The carrier (simulated): its API times out on the task's first attempt."""
    if attempt == 1:
        raise TimeoutError("the carrier's API did not answer")
    return {"tracking": f"TRK-{order_id}", "attempt": attempt}


@task(queue="orders")
async def fulfil_order(priced: dict[str, Any], ctx: AsyncContext) -> dict[str, Any]:
    """Charge, wait for settlement and approval, ship: each part once per order."""
    order_id = priced["id"]
    charge = await ctx.step("charge", charge_card, order_id, priced["total"], ctx.attempt)
    await ctx.sleep("settlement", SETTLEMENT)  # ends this attempt; back after it
    approval = await ctx.wait_for_event(  # ends this attempt too; back with the event
        "approval", event="order.approved", match={"order": order_id}, timeout=APPROVAL_TIMEOUT
    )
    if approval is None:
        raise Fail(f"order {order_id} was not approved within {APPROVAL_TIMEOUT}")
    shipment = await ctx.step("ship", ship, order_id, ctx.attempt)
    return {
        "order": order_id,
        "charge": charge,
        "approved_by": approval["data"]["by"],
        "shipment": shipment,
        "attempt": ctx.attempt,
    }
