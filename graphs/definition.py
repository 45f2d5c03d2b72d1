"""Helpers for writing graph definitions (plain dicts in the NeoGraph topology format)."""

from __future__ import annotations

from typing import Any

__all__ = ["END", "SCHEMA_VERSION", "START", "chain", "channels"]

START, END = "__start__", "__end__"
SCHEMA_VERSION = 1  # strict keys: unknown top-level or channel keys fail at compile


def chain(*names: str) -> list[dict[str, str]]:
    """Edges along a path: chain("a", "b", "c") is a→b, b→c."""
    return [{"from": a, "to": b} for a, b in zip(names, names[1:], strict=False)]


def channels(*names: str, append: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    """Overwrite channels, plus ``append`` channels that collect lists across nodes."""
    out: dict[str, dict[str, Any]] = {name: {} for name in names}
    out.update({name: {"reducer": "append", "initial": []} for name in append})
    return out
