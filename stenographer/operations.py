"""The operation table: which graph each MCP tool and each command runs.

Every tool and every command runs exactly one named graph (a watcher runs its graph
once per tick; a host's hook the ``hook`` graph, whatever the event; ``doctor`` its graph
without a store). ``serve``, ``inspect`` and ``demo`` host or drive the others;
``config`` and ``graphs`` (this table) print text: they run none of their own.
``stenographer graphs`` lists every graph with its stages, its edges and the tools and
commands below that invoke it; ``tests/e2e/test_operations.py`` checks the table against the
server's tools/list, the command line's parser and real calls.
"""

from __future__ import annotations

from typing import Any

__all__ = ["COMMANDS", "NO_GRAPH", "TOOLS", "definitions", "graph_table", "render"]

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
}

NO_GRAPH: dict[str, str] = {
    "serve": "hosts the MCP server, whose tools run the graphs",
    "inspect": "hosts the browser inspector, whose views run the inspect_* graphs",
    "demo": "drives the tools through a real MCP client",
    "config": "prints a host's configuration",
    "graphs": "prints this table",
}

INTERNAL = "(run by another graph, the inspector, a watcher or start-up)"


def definitions() -> list[dict[str, Any]]:
    """Every graph definition (plain data: nothing is compiled)."""
    from graphs.registry import all_definitions

    return all_definitions()


def graph_table() -> list[dict[str, Any]]:
    """Every graph: its stages in definition order, its edges (a conditional edge as
    ``from``, ``condition`` and ``routes``), and the tools and commands that run it."""
    table = []
    for definition in definitions():
        name = definition["name"]
        table.append({
            "graph": name,
            "stages": [_stage(stage, spec) for stage, spec in definition["nodes"].items()],
            "edges": [{"from": e["from"], "to": e["to"]} for e in definition["edges"]],
            "conditional_edges": [
                {"from": c["from"], "condition": c["condition"], "routes": dict(c["routes"])}
                for c in definition.get("conditional_edges", [])],
            "tools": sorted(t for t, g in TOOLS.items() if g == name),
            "commands": sorted(c for c, g in COMMANDS.items() if g == name),
        })
    return table


def _stage(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """A stage: its node type, or for a subgraph stage the graph it runs."""
    if spec["type"] == "subgraph":
        return {"name": name, "type": "subgraph", "graph": spec["definition"]["name"]}
    return {"name": name, "type": spec["type"]}


def render(table: list[dict[str, Any]]) -> str:
    """The table as text: per graph, who runs it, then its stages and edges."""
    lines = []
    for graph in table:
        callers = [*graph["tools"], *(f"`{c}`" for c in graph["commands"])]
        lines.append(f"{graph['graph']}  ←  {', '.join(callers) or INTERNAL}")
        lines.append("  stages: " + ", ".join(
            f"{s['name']} ({s.get('graph') or s['type']})" for s in graph["stages"]))
        edges = [f"{e['from']} → {e['to']}" for e in graph["edges"]]
        edges += [f"{c['from']} ⇒ {c['condition']}: "
                  + ", ".join(f"{label} → {to}" for label, to in c["routes"].items())
                  for c in graph["conditional_edges"]]
        lines.append("  edges: " + "; ".join(edges))
    return "\n".join(lines)
