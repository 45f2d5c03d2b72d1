"""The operation table: which graph each MCP tool and each command runs.

Every tool and every command runs exactly one named graph (a watcher runs its graph
once per tick; a host's hook the ``hook`` graph, whatever the event; ``doctor`` its graph
without a store; ``graphs`` the ``graph_catalog`` graph). ``serve``, ``inspect`` and
``demo`` host or drive the others and ``config`` prints text: they run none of their own.
``stenographer graphs`` lists every graph with its stages, its edges and the tools and
commands below that invoke it; ``tests/e2e/test_operations.py`` checks the table against the
server's tools/list, the command line's parser and real calls.
"""

from __future__ import annotations

from typing import Any

__all__ = ["COMMANDS", "NO_GRAPH", "TOOLS", "definitions", "graph_table"]

TOOLS: dict[str, str] = {
    "stenographer_ingest_exchange": "ingest",
    "stenographer_get_brief": "notes",
    "stenographer_compact_guard": "guard",
    "stenographer_mark_milestone": "milestone",
    "stenographer_query_history": "search",
    "stenographer_capture_status": "status",
    "stenographer_audit": "contract_audit",
    "stenographer_forget": "forget",
    "stenographer_graph_query": "graph_query",
}

# Commands by their words on the command line (a group's subcommand: "sync push").
COMMANDS: dict[str, str] = {
    "search": "search",
    "brief": "notes",
    "guard": "guard",
    "sessions": "sessions",
    "stats": "stats",
    "trace": "trace",
    "status": "status",
    "audit": "contract_audit",
    "forget": "forget",
    "export": "sync_export",
    "import": "sync_import",
    "sync push": "sync_push",
    "sync pull": "sync_pull",
    "sync status": "status",
    "bus publish": "bus_publish",
    "migrate": "migrate",
    "graphrag extract": "graphrag_extract",
    "graphrag stats": "graphrag_stats",
    "graphrag communities": "graphrag_community",
    "graphrag export": "graphrag_export",
    "graphrag query": "graph_query",
    "graphrag reset": "graphrag_reset",
    "capture": "capture",
    "hook": "hook",
    "doctor": "doctor",
    "index rebuild": "keyword_index_rebuild",
    "graphs": "graph_catalog",
}

NO_GRAPH: dict[str, str] = {
    "serve": "hosts the MCP server, whose tools run the graphs",
    "inspect": "hosts the browser inspector, whose views run the inspect_* graphs",
    "demo": "drives the tools through a real MCP client",
    "config": "prints a host's configuration",
}


def definitions() -> list[dict[str, Any]]:
    """Every graph definition (plain data: nothing is compiled)."""
    from graphs.registry import all_definitions

    return all_definitions()


def graph_table() -> tuple[dict[str, Any], dict[str, Any]]:
    """One run of ``graph_catalog``: the table (``graphs``, and ``text``) and the trace."""
    from graphs.registry import build_graphs

    request = {"definitions": definitions(), "tools": TOOLS, "commands": COMMANDS}
    out, trace = build_graphs().run("graph_catalog", {"request": request}, None)
    reply: dict[str, Any] = out["reply"]
    return reply, trace
