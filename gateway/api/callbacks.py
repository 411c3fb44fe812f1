"""Routes workers call back on while they run a task, authorised by the lease token alone.

``release`` takes no body (an empty one, or ``{}``, is ignored): the worker is shutting down and
gives the task back to the queue at once, without spending an attempt.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from gateway.api.routing import QUEUE, TASK_ID, Call, Handler, Operation, Param
from gateway.core.errors import Unauthorized
from gateway.security.auth import Access
from sdk.wire import (
    HEADER_LEASE,
    CallbackAck,
    CallIn,
    CheckpointIn,
    ErrorIn,
    HeartbeatIn,
    HeartbeatOut,
    InvokeIn,
    LogIn,
    ResultIn,
    SleepIn,
    StepIn,
    StepOut,
    WaitIn,
)


def _lease(call: Call) -> str:
    token = call.request.headers.get(HEADER_LEASE)
    if not token:
        raise Unauthorized(f"a callback must carry its lease token in the '{HEADER_LEASE}' header")
    return token


async def heartbeat(call: Call) -> BaseModel:
    return await call.services.callbacks.heartbeat(
        call.queue, call.task_id, _lease(call), call.body
    )


async def checkpoint(call: Call) -> BaseModel:
    return await call.services.callbacks.checkpoint(
        call.queue, call.task_id, _lease(call), call.body
    )


async def step(call: Call) -> BaseModel:
    return await call.services.callbacks.step(call.queue, call.task_id, _lease(call), call.body)


async def sleep(call: Call) -> BaseModel:
    return await call.services.callbacks.sleep(call.queue, call.task_id, _lease(call), call.body)


async def wait(call: Call) -> BaseModel:
    return await call.services.callbacks.wait(call.queue, call.task_id, _lease(call), call.body)


async def invoke(call: Call) -> BaseModel:
    return await call.services.callbacks.invoke(call.queue, call.task_id, _lease(call), call.body)


async def make_call(call: Call) -> BaseModel:
    return await call.services.callbacks.call(call.queue, call.task_id, _lease(call), call.body)


async def append_logs(call: Call) -> BaseModel:
    return await call.services.callbacks.logs(call.queue, call.task_id, _lease(call), call.body)


async def report_result(call: Call) -> BaseModel:
    return await call.services.callbacks.result(call.queue, call.task_id, _lease(call), call.body)


async def report_error(call: Call) -> BaseModel:
    return await call.services.callbacks.error(call.queue, call.task_id, _lease(call), call.body)


async def release(call: Call) -> BaseModel:
    return await call.services.callbacks.release(call.queue, call.task_id, _lease(call))


LEASE = Param(
    HEADER_LEASE,
    "header",
    "The lease token the push carried; one that is not the task's current lease gets 409.",
    Annotated[str, Field(min_length=1, pattern=r"^[!-~]+$")],
    required=True,
)
BASE = "/v1/callbacks/{queue}/{task_id}"


def _callback(
    kind: str,
    summary: str,
    handler: Handler,
    body: type[BaseModel] | None,
    response: type[BaseModel],
    description: str = "",
    errors: tuple[int, ...] = (),
) -> Operation:
    return Operation(
        "POST",
        f"{BASE}/{kind}",
        summary,
        "callbacks",
        Access.LEASE,
        handler,
        body=body,
        response=response,
        params=(QUEUE, TASK_ID, LEASE),
        errors=(404, 409, *errors),  # no such queue or task; not the current lease
        description=description,
    )


OPERATIONS = [
    _callback(
        "heartbeat",
        "Keep the lease alive; the answer says whether cancel was requested",
        heartbeat,
        HeartbeatIn,
        HeartbeatOut,
    ),
    _callback(
        "checkpoint",
        "Store state for the next attempt (extends the lease)",
        checkpoint,
        CheckpointIn,
        CallbackAck,
    ),
    _callback(
        "step",
        "Record a durable step's result for later attempts",
        step,
        StepIn,
        StepOut,
        "Recorded with the task (name, result, attempt, time) and carried in the push body's "
        "'steps' to every later attempt. A name recorded before keeps its first result "
        "('recorded': false). A cancel requested of the task does not refuse it (the attempt "
        "still runs): 'cancel_requested' says so, as a heartbeat's answer does. 413 when the "
        "task's steps would pass MAX_STEPS_BYTES in all.",
        errors=(413,),
    ),
    _callback("logs", "Append log lines", append_logs, LogIn, CallbackAck),
    _callback("result", "Report success with the result", report_result, ResultIn, CallbackAck),
    _callback("error", "Report failure, retryable or not", report_error, ErrorIn, CallbackAck),
    _callback(
        "release",
        "Give the task back to the queue (the worker is shutting down)",
        release,
        None,
        CallbackAck,
        "Ends the attempt as 'released': the task is queued again at once and the attempt is "
        "not counted against max_attempts. After a cancel request it ends the task cancelled "
        "instead (the attempt reads 'cancelled'). No body is needed (any is ignored).",
    ),
    _callback(
        "sleep",
        "End the attempt and push the task again at a given time (a durable sleep)",
        sleep,
        SleepIn,
        CallbackAck,
        "Ends the attempt as 'released' (not counted against max_attempts) with the task "
        "scheduled for 'until': no worker holds it meanwhile, and its steps and checkpoint stay "
        "for the next push. After a cancel request it ends the task cancelled instead (the "
        "attempt reads 'cancelled').",
    ),
    _callback(
        "wait",
        "End the attempt until an event arrives or a timeout passes (a wait for an event)",
        wait,
        WaitIn,
        CallbackAck,
        "Ends the attempt as 'released' (not counted against max_attempts) with the task "
        "scheduled until the timeout and the wait recorded with it (its view's 'wait'). The "
        "first event named 'event' whose data has every field of 'match' at the same value, "
        "accepted after the wait was recorded (or up to 'lookback' seconds before), records "
        "the step 'step' with the result {id, name, data} and makes the task ready; at the "
        "timeout the step's result is null. Either way the task is pushed again with the "
        "step among its steps, once. One event resumes every task waiting on it. After a "
        "cancel request it ends the task cancelled instead (the attempt reads 'cancelled').",
    ),
    _callback(
        "invoke",
        "Enqueue a child task and end the attempt until the child ends (an invoke)",
        invoke,
        InvokeIn,
        CallbackAck,
        "Ends the attempt as 'released' (not counted against max_attempts) with the task "
        "scheduled until the timeout and its wait for the child recorded (its view's 'wait'), "
        "and enqueues the child task 'name' in 'queue' (this task's by default) with an id "
        "derived from this task's id and 'step': the same step always invokes the same child, "
        "once. When the child ends, the step 'step' is recorded with the result {state: "
        "'succeeded', id, result} or {state: 'failed' | 'dead' | 'cancelled', id, error} and "
        "the task is ready; at the timeout, {state: 'timed_out', id, error}; a child the "
        "gateway refuses (no such queue, a payload refused), {state: 'refused', id, error}. "
        "Either way the task is pushed again with the step among its steps, once. After a "
        "cancel request it ends the task cancelled instead, and no child is enqueued.",
    ),
    _callback(
        "call",
        "Have the gateway make an HTTP request and end the attempt until it answers (a call)",
        make_call,
        CallIn,
        CallbackAck,
        "Ends the attempt as 'released' (not counted against max_attempts) with the task "
        "scheduled until the call's backstop (4 x timeout + 60 s) and its wait for the call "
        "recorded (its view's 'wait'); the gateway then makes the request itself, with the "
        "header 'Idempotency-Key: <task id>:<step>', the endpoints' SSRF rules (redirects "
        "followed by hand, at most 5, each checked), connection errors tried 3 times, and the "
        "answer's body capped (JOBGATE_CALL_MAX_BODY_BYTES). The step 'step' is recorded with "
        "{status, headers, body} for an answer of any status, or {error, kind: 'refused' | "
        "'unreachable' | 'timed_out' | 'too_large' | 'redirects'} when none came, and the task "
        "is pushed again with it among its steps, once. A gateway that stops mid-call leaves it "
        "to another after the call's lease (at-least-once). After a cancel request it ends the "
        "task cancelled instead, and no call is made.",
    ),
]
