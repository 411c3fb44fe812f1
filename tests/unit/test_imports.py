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
