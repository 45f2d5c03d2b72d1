"""The graph catalog: every graph definition with its stages, edges and callers, as
data (``stenographer graphs --json``) and as text."""

from __future__ import annotations

from typing import Any, TypedDict

from nodes.context import node

__all__ = ["CatalogReply", "graph_catalog", "render"]

INTERNAL = "(run by another graph, the inspector, a watcher or start-up)"


class CatalogReply(TypedDict):
    graphs: list[dict[str, Any]]
    text: str


class GraphCatalogWrites(TypedDict):
    reply: CatalogReply


@node
def graph_catalog(request: dict[str, Any]) -> GraphCatalogWrites:
    """``request``: ``definitions`` (every graph's definition), ``tools`` and
    ``commands`` (each caller's graph name)."""
    tools: dict[str, str] = request["tools"]
    commands: dict[str, str] = request["commands"]
    table = []
    for definition in request["definitions"]:
        name = definition["name"]
        table.append({
            "graph": name,
            "stages": [_stage(stage, spec) for stage, spec in definition["nodes"].items()],
            "edges": [{"from": e["from"], "to": e["to"]} for e in definition["edges"]],
            "conditional_edges": [
                {"from": c["from"], "condition": c["condition"], "routes": dict(c["routes"])}
                for c in definition.get("conditional_edges", [])],
            "tools": sorted(t for t, g in tools.items() if g == name),
            "commands": sorted(c for c, g in commands.items() if g == name),
        })
    return {"reply": {"graphs": table, "text": render(table)}}


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
