"""The graph a host hook runs when a session starts, built on its own.

A ``SessionStart`` hook answers within the host's time budget, from a fresh process:
importing every node module and compiling every graph (``graphs.registry``) costs about
half a second before the first query. This module imports only the nodes of the
briefing graph and compiles only that graph. ``graphs.registry`` registers the same
node functions and conditions, so the server and the CLI run the same graph.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from graphs import briefing
from graphs.runner import Graphs
from nodes.context import NodeFn
from nodes.evaluate_contracts.briefing_input import checked_briefing
from nodes.extract.fusion import fused_hits
from nodes.extract.query_terms import keyword_query
from nodes.extract.resolutions import blocker_status
from nodes.load_evidence.briefing import project_signals, session_signals
from nodes.load_evidence.hits import keyword_candidates
from nodes.load_evidence.session_view import guard_evidence
from nodes.publish.briefing import briefing_markdown
from nodes.publish.traces import persist_trace

__all__ = ["BRIEFING_CONDITIONS", "BRIEFING_NODES", "build_briefing_graphs"]

# The node functions of the briefing graph that no other graph uses (the registry adds
# them to its own; the others it registers already).
BRIEFING_NODES: tuple[NodeFn, ...] = (checked_briefing, session_signals, project_signals,
                                      blocker_status, briefing_markdown)
_SHARED_NODES: tuple[NodeFn, ...] = (keyword_query, keyword_candidates, fused_hits,
                                     guard_evidence)

BRIEFING_CONDITIONS: dict[str, Callable[[Any], str]] = {
    "briefing_scope": lambda s: str(s.get("scope")),
    "has_query": lambda s: "yes" if s.get("query")["text"] is not None else "no",
}


def build_briefing_graphs() -> Graphs:
    """A ``Graphs`` holding the briefing graph only (traces persisted as for any run)."""
    graphs = Graphs(trace_sink=persist_trace)
    for fn in BRIEFING_NODES + _SHARED_NODES:
        graphs.node_type(fn.__name__, fn)
    for name, condition in BRIEFING_CONDITIONS.items():
        graphs.condition(name, condition)
    graphs.compile(briefing.DEFINITION)
    return graphs
