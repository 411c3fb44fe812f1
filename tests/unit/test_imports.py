"""The import graph: ``sdk`` never imports ``gateway``, and no module imports itself back.

Imports under ``TYPE_CHECKING`` count too: a cycle hidden there is still a cycle for readers.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("gateway", "sdk")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets.add(node.module)
            elif isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
        # A package's own __init__ importing its submodules is how it re-exports them.
        graph[name] = {
            t for t in targets if t in files and t != name and not t.startswith(name + ".")
        }
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 on the path, 2 done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_sdk_never_imports_gateway() -> None:
    leaks = {
        m: sorted(t for t in ts if t.split(".")[0] == "gateway")
        for m, ts in _graph().items()
        if m.startswith("sdk")
    }
    assert {m: ts for m, ts in leaks.items() if ts} == {}


def test_no_import_cycles() -> None:
    assert _cycle(_graph()) is None


# The gateway's rooms, top to bottom: a module imports only modules of its own room or of rooms
# below it (gateway/__init__.py draws the same list). The root's modules are rooms of their own.
ROOMS = (
    "gateway.__main__",
    "gateway.cli",
    "gateway.commands",
    "gateway.serving",
    "gateway.app",
    "gateway.admin",
    "gateway.api",
    "gateway.background",
    "gateway.services",
    "gateway.dispatch",
    "gateway.jobs",
    "gateway.telemetry",
    "gateway.caches",
    "gateway.security",
    "gateway.settings",
    "gateway.store",
    "gateway.core",
)


def _room(module: str) -> str | None:
    return next((r for r in ROOMS if module == r or module.startswith(r + ".")), None)


def _upward_imports(graph: dict[str, set[str]]) -> list[str]:
    rank = {room: i for i, room in enumerate(ROOMS)}
    found: list[str] = []
    for module, targets in sorted(graph.items()):
        room = _room(module)
        if room is None:
            continue
        for target in sorted(targets):
            to = _room(target)
            if to is not None and to != room and rank[to] < rank[room]:
                found.append(f"{module} -> {target}")
    return found


def test_every_gateway_module_is_in_a_room() -> None:
    stray = [m for m in _graph() if m.startswith("gateway.") and _room(m) is None]
    assert stray == []


def test_rooms_import_only_rooms_below() -> None:
    assert _upward_imports(_graph()) == []


def test_an_upward_import_is_caught() -> None:
    graph = {
        "gateway.jobs.schedule": {"gateway.services.runs", "gateway.store.jobs"},
        "gateway.store.records": {"gateway.dispatch.pusher", "gateway.core.errors"},
        "gateway.background.job_firing": {"gateway.services.runs"},
    }
    assert _upward_imports(graph) == [
        "gateway.jobs.schedule -> gateway.services.runs",
        "gateway.store.records -> gateway.dispatch.pusher",
    ]
