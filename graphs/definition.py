"""Helpers for writing graph definitions (plain dicts in the NeoGraph topology format)."""

from __future__ import annotations

from typing import Any

__all__ = ["END", "SCHEMA_VERSION", "START", "chain", "channels", "linear"]

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


def linear(name: str, graph_channels: dict[str, dict[str, Any]],
           **stages: str | dict[str, Any]) -> dict[str, Any]:
    """A graph whose stages run one after another, in the order given: each stage is
    named by its keyword and given as its node type, or as a mapping of ``type`` and the
    node's settings (``validate={"type": "checked_listing", "default_limit": 50}``)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "name": name,
        "channels": graph_channels,
        "nodes": {stage: {"type": spec} if isinstance(spec, str) else spec
                  for stage, spec in stages.items()},
        "edges": chain(START, *stages, END),
    }
