"""What every node receives: the run context and a read view of the graph state.

Nodes are plain functions ``(state, cfg) -> writes``. They import neither the MCP SDK
nor the graph engine: ``state`` is any object with ``get(channel)`` and ``ctx``; the
graph runner's adapter supplies it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from nodes.extract.patterns import DEFAULT_PATTERNS, SignalPatterns
from store.db import Store

__all__ = ["Knobs", "NodeFn", "RunContext", "State", "Writes"]

Writes = dict[str, Any]


class Knobs(Protocol):
    """The settings that nodes read (``stenographer.settings.Settings`` satisfies it)."""

    @property
    def turn_limit(self) -> int: ...
    @property
    def top_k(self) -> int: ...
    @property
    def max_chars(self) -> int: ...
    @property
    def max_content_chars(self) -> int: ...
    @property
    def trace_retention(self) -> int: ...
    @property
    def vector_dim(self) -> int: ...
    @property
    def sync_peer(self) -> str | None: ...
    @property
    def sync_token(self) -> str | None: ...
    @property
    def sync_timeout(self) -> float: ...


@dataclass(frozen=True)
class RunContext:
    """Shared by every run of a process: the store, the settings, compiled patterns."""

    store: Store
    settings: Knobs
    patterns: SignalPatterns = DEFAULT_PATTERNS


class State(Protocol):
    ctx: RunContext

    def get(self, channel: str) -> Any: ...


NodeFn = Callable[[State, Mapping[str, Any]], Writes]
