"""Persisting stage traces (called by the graph runner after every run, not a node)."""

from __future__ import annotations

from typing import Any

from nodes.context import RunContext

__all__ = ["persist_trace"]


def persist_trace(ctx: RunContext, trace: dict[str, Any], started_at: float) -> None:
    """Queue the trace for the store's background writer (bounded retention)."""
    ctx.store.traces.add(trace, started_at, ctx.settings.trace_retention)
