"""Routes about API keys: ending every admin UI session of one."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from gateway.api.routing import Call, Operation, Param
from gateway.security.auth import Access
from sdk.wire import SessionsEnded

KEY_NAME = Param(
    "key_name",
    "path",
    "The API key's name: its 'name' in JOBGATE_API_KEYS (key-<position from 0> when it has "
    "none), as the admin UI shows it.",
    Annotated[str, Field(min_length=1, max_length=200)],
    True,
)


async def end_key_sessions(call: Call) -> BaseModel:
    return await call.services.sessions.end_key(KEY_NAME.parse(call.path("key_name")))


OPERATIONS = [
    Operation(
        "DELETE",
        "/v1/keys/{key_name}/sessions",
        "End every admin UI session of an API key",
        "keys",
        Access.ADMIN,
        end_key_sessions,
        response=SessionsEnded,
        params=(KEY_NAME,),
        errors=(404,),
        description="Every admin UI session opened with the key ends at its next request, on "
        "every gateway (sessions live in Redis), and its CSRF tokens with it; the key itself "
        "stays valid and may sign in again. To stop the key too, remove it from "
        "JOBGATE_API_KEYS. 404 when no configured key has this name.",
    ),
]
