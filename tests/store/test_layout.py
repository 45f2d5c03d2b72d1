"""The store's module graph: no import cycle, and the backend a connection belongs to is
asked of its dialect, never tested outside the dialect modules."""

from __future__ import annotations

import ast
from pathlib import Path

STORE = Path(__file__).resolve().parents[2] / "store"


def _module(path: Path) -> str:
    parts = list(path.relative_to(STORE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    """Each store module's imports of other store modules, every import statement
    counted (inside functions and ``TYPE_CHECKING`` blocks too)."""
    paths = {_module(p): p for p in STORE.rglob("*.py")}
    edges: dict[str, set[str]] = {}
    for name, path in paths.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)  # ``from store.postgres import search``: a module
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
        edges[name] = {m for m in found if m in paths and m != name}
    return edges


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle, as the modules along it, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(name: str) -> list[str] | None:
        state[name] = 1
        path.append(name)
        for nxt in sorted(edges[name]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        state[name] = 2
        path.pop()
        return None

    for name in sorted(edges):
        if name not in state and (found := visit(name)) is not None:
            return found
    return None


def test_the_store_has_no_import_cycle():
    edges = _imports()
    assert {"store.search", "store.dialect", "store.postgres.search"} <= edges.keys()
    assert _cycle(edges) is None, " -> ".join(_cycle(edges) or [])


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]


def test_only_the_dialect_modules_know_which_dialect_a_connection_speaks():
    dialects = {STORE / "sqlite", STORE / "postgres"}
    for path in STORE.rglob("*.py"):
        if path.parent in dialects or path.name == "dialect.py":
            continue
        assert "is_postgres(" not in path.read_text(encoding="utf-8"), path
