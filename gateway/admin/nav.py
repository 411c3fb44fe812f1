"""The admin UI's sections, in menu order. A section that is not built yet is listed with
``ready=False``: the menu shows it greyed out as "coming", and adding it is a template, a page
module in ``gateway.admin.pages`` and flipping the flag."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Section:
    key: str
    title: str
    path: str
    ready: bool = True


NAV: tuple[Section, ...] = (
    Section("queues", "Queues", "/admin/queues"),
    Section("tasks", "Tasks", "/admin/tasks"),
    Section("running", "Running", "/admin/running"),
    Section("deadletters", "Dead letters", "/admin/deadletters"),
    Section("jobs", "Jobs", "/admin/jobs"),
    Section("events", "Events", "/admin/events"),
)
