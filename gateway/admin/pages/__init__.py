"""The admin UI's pages, one module per section (see ``gateway.admin.nav``). Each module has
``routes(admin)``; a new section adds its module to :data:`SECTIONS`."""

from __future__ import annotations

from collections.abc import Callable

from starlette.routing import BaseRoute

from gateway.admin.pages import (
    bulk,
    deadletters,
    events,
    find,
    jobs,
    login,
    queue,
    queue_home,
    queues,
    running,
    runs,
    tasks,
)
from gateway.admin.web import Admin

SECTIONS: tuple[Callable[[Admin], list[BaseRoute]], ...] = (
    login.routes,
    queues.routes,
    queue.routes,
    queue_home.routes,
    tasks.routes,
    running.routes,
    deadletters.routes,
    jobs.routes,
    events.routes,
    runs.routes,
    find.routes,
    bulk.routes,
)
