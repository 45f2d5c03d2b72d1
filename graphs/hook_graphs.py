"""The graphs a host hook runs when a session starts.

A ``SessionStart`` hook answers within the host's time budget, from a fresh process.
The registry compiles a graph on its first run and imports only its nodes' modules, so
the hook's process compiles the briefing graph alone; this is the same registry under
the name the hook uses.
"""

from __future__ import annotations

from graphs.registry import build_graphs
from graphs.runner import Graphs

__all__ = ["build_briefing_graphs"]


def build_briefing_graphs() -> Graphs:
    """The process's graphs for a hook (the briefing graph compiles on its first run)."""
    return build_graphs()
