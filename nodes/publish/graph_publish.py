"""Nodes: write GraphRAG batches and communities, reset the graph, and render replies
and exports (GraphML for Gephi and similar tools, or JSON; byte-identical for the same
store and seed: everything is ordered by key)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, TypedDict
from xml.sax.saxutils import escape, quoteattr

from nodes.context import RunContext, node
from nodes.publish.wording import counted
from store.graph_batches import BatchRecords, reset_graph, write_batch
from store.graph_reads import write_communities

__all__ = [
    "CommunityReply",
    "ExtractReply",
    "GraphExport",
    "GraphReset",
    "GraphStatsReply",
    "communities_text",
    "community_text",
    "exported_graph",
    "extraction_reply",
    "extraction_tally",
    "graph_query_text",
    "graph_reset",
    "graph_stats_text",
    "published_communities",
    "published_graph_batch",
]


class PublishedGraphBatchWrites(TypedDict):
    published: Any


@node
def published_graph_batch(batch: Any, records: BatchRecords, skipped: Any, *,
                          run: RunContext) -> PublishedGraphBatchWrites:
    cursors = dict(records.cursors)  # the sessions passed over move too (--since)
    for session_id, through in skipped.items():
        cursors[session_id] = max(cursors.get(session_id, 0), through)
    with run.store.write() as conn:
        written = write_batch(conn, replace(records, cursors=cursors))
    return {"published": {"turns": batch["turns"], "remaining": batch["remaining"],
                          "entities": written["entities"], "edges": written["edges"],
                          "turns_read_total": written["turns_read"]}}


class ExtractionTallyWrites(TypedDict):
    tally: Any


@node
def extraction_tally(published: Any, tally: Any) -> ExtractionTallyWrites:
    """The batches and turns an extraction has published so far (a batch that found no
    pending turn is not counted)."""
    turns = published["turns"]
    tally = tally or {"batches": 0, "turns_read": 0}
    return {"tally": {"batches": tally["batches"] + (1 if turns else 0),
                      "turns_read": tally["turns_read"] + turns}}


class PublishedCommunitiesWrites(TypedDict):
    communities_written: Any


@node
def published_communities(communities: Any, ranks: Any, detection: Any, *,
                          run: RunContext) -> PublishedCommunitiesWrites:
    with run.store.write() as conn:
        write_communities(conn, ranks, communities, detection)
    return {"communities_written": len(communities)}


class ExtractReply(TypedDict):
    """The graphrag_extract graph's output: what the run read, and the communities it
    found (None when they were fresh)."""

    turns_read: int
    batches: int
    detection: dict[str, Any] | None


class ExtractionReplyWrites(TypedDict):
    reply: ExtractReply


@node
def extraction_reply(tally: dict[str, int], detection: dict[str, Any] | None
                     ) -> ExtractionReplyWrites:
    return {"reply": ExtractReply(turns_read=tally["turns_read"], batches=tally["batches"],
                                  detection=detection)}


class GraphReset(TypedDict):
    """The graphrag_reset graph's output: the rows removed, and the same as text."""

    removed: dict[str, int]
    text: str


class GraphResetWrites(TypedDict):
    reply: GraphReset


@node
def graph_reset(*, run: RunContext) -> GraphResetWrites:
    with run.store.write() as conn:
        removed = reset_graph(conn)
    return {"reply": GraphReset(removed=removed, text=(
        f"GraphRAG graph reset: {counted(removed['entities'], 'entity', 'entities')} and "
        f"{counted(removed['edges'], 'edge')} removed; the turns are untouched."))}


class GraphStatsReply(TypedDict):
    """The graphrag_stats graph's output: the graph's counts, and the same as text."""

    stats: dict[str, Any]
    text: str


class GraphStatsTextWrites(TypedDict):
    reply: GraphStatsReply


@node
def graph_stats_text(stats: dict[str, Any], *, run: RunContext) -> GraphStatsTextWrites:
    s = stats
    kinds = ", ".join(f"{k} {n}" for k, n in s["entity_kinds"].items()) or "-"
    edge_kinds = ", ".join(f"{k} {v['edges']}" for k, v in s["edge_kinds"].items()) or "-"
    lines = [f"turns read: {s['turns_read']} (pending: {s['pending']}, sessions: "
             f"{s['sessions']})",
             f"entities: {s['entities']} ({kinds})",
             f"edges: {s['edges']} ({edge_kinds})",
             f"provenance rows: {s['entity_turns']} entity-turn, {s['edge_turns']} edge-turn",
             f"communities: {s['communities']}" + (" (stale: run `graphrag extract`)"
                                                  if s["stale"] else "")]
    if s["detection"]:
        d = s["detection"]
        lines.append(f"detection: {d['algorithm']} seed {d['seed']} resolution "
                     f"{d['resolution']}, {counted(d['nodes'], 'entity', 'entities')}, "
                     f"{d['louvain_ms']} ms")
    return {"reply": GraphStatsReply(stats=stats, text="\n".join(lines))}


class CommunityReply(TypedDict):
    """The graphrag_community graph's output: a page of communities and their number,
    or one community and its representative sentences (the others None); and text."""

    communities: list[dict[str, Any]] | None
    total: int | None
    community: dict[str, Any] | None
    sentences: list[dict[str, Any]] | None
    text: str


class CommunitiesTextWrites(TypedDict):
    reply: CommunityReply


@node
def communities_text(communities: list[dict[str, Any]], total: int, *,
                     run: RunContext) -> CommunitiesTextWrites:
    rows = communities
    text = ("\n".join(f"#{c['id']} ({counted(c['size'], 'entity', 'entities')}): "
                      f"{', '.join(c['top_entities'])}" for c in rows) if rows
            else "No communities yet (run `stenographer graphrag extract`).")
    return {"reply": CommunityReply(communities=rows, total=total, community=None,
                                    sentences=None, text=text)}


class CommunityTextWrites(TypedDict):
    reply: CommunityReply


@node
def community_text(community: dict[str, Any], sentences: list[dict[str, Any]]
                   ) -> CommunityTextWrites:
    c = community
    lines = [f"Community #{c['id']} ({counted(c['size'], 'entity', 'entities')}): "
             f"{c['label']}", "", "Entities:"]
    lines += [f"- {e['label']} [{e['kind']}] centrality {e['centrality']:.4f}, "
              f"{counted(e['turns'], 'turn')} (e.g. #{', #'.join(map(str, e['turn_ids'][:3]))})"
              for e in c["entities"]]
    lines += ["", "Strongest relations:"]
    lines += [f"- {r['source']} —{r['kind']}→ {r['target']} ({counted(r['turns'], 'turn')}: "
              f"#{', #'.join(map(str, r['turn_ids']))})" for r in c["relations"]]
    lines += ["", "Representative sentences:"]
    lines += [f"- #{s['exchange_id']} [{s['session_id']}] {s['text']}"
              for s in sentences]
    return {"reply": CommunityReply(communities=None, total=None, community=community,
                                    sentences=sentences, text="\n".join(lines))}


class GraphQueryTextWrites(TypedDict):
    reply: Any


@node
def graph_query_text(graph_result: Any, *, run: RunContext) -> GraphQueryTextWrites:
    r = graph_result
    if not r["entities"]:
        return {"reply": {**r, "text": "No entity of the query is in the graph (run "
                                       "`stenographer graphrag extract` to build it from new "
                                       "turns)."}}
    lines = ["Entities: " + ", ".join(f"{e['label']} ({e['kind']})" for e in r["entities"])]
    if r["relations"]:
        lines.append("Relations:")
        lines += [f"- {x['source']} —{x['kind']}→ {x['target']} (#"
                  + ", #".join(map(str, x["turn_ids"])) + ")" for x in r["relations"]]
    if r["communities"]:
        lines.append("Communities: " + "; ".join(f"#{c['id']} {c['label']}"
                                                 for c in r["communities"]))
    lines.append("Supporting turns:")
    lines += [f"- #{t['exchange_id']} [{t['session_id']} {t['role']} {t['created_at']}] "
              f"{t['snippet']}" for t in r["turns"]]
    return {"reply": {**r, "text": "\n".join(lines)[:8_000]}}


def _graphml(data: Mapping[str, Any]) -> str:
    keys = [("d0", "node", "label", "string"), ("d1", "node", "kind", "string"),
            ("d2", "node", "turns", "int"), ("d3", "node", "community", "int"),
            ("d4", "node", "centrality", "double"), ("d5", "node", "aliases", "string"),
            ("d6", "node", "turn_ids", "string"), ("d7", "edge", "kind", "string"),
            ("d8", "edge", "turns", "int"), ("d9", "edge", "turn_ids", "string")]
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">']
    out += [f'  <key id="{i}" for="{f}" attr.name="{n}" attr.type="{t}"/>'
            for i, f, n, t in keys]
    out.append('  <graph id="stenographer" edgedefault="directed">')
    for key, kind, label, turns, community, centrality, aliases, ids in data["entities"]:
        out.append(f"    <node id={quoteattr(key)}>")
        values = [label, kind, turns, community, f"{centrality:.9g}",
                  "|".join(json.loads(aliases)), " ".join(map(str, json.loads(ids)))]
        out += [f'      <data key="d{i}">{escape(str(v))}</data>'
                for i, v in enumerate(values) if v is not None]
        out.append("    </node>")
    for n, (src, dst, kind, turns, ids) in enumerate(data["edges"]):
        out.append(f'    <edge id="e{n}" source={quoteattr(src)} target={quoteattr(dst)}>')
        out += [f'      <data key="d7">{escape(kind)}</data>',
                f'      <data key="d8">{turns}</data>',
                f'      <data key="d9">{" ".join(map(str, json.loads(ids)))}</data>',
                "    </edge>"]
    out += ["  </graph>", "</graphml>", ""]
    return "\n".join(out)


def _json(data: Mapping[str, Any]) -> str:
    doc = {
        "detection": data["detection"],
        "nodes": [{"id": key, "label": label, "kind": kind, "turns": turns,
                   "community": community, "centrality": round(centrality, 9),
                   "aliases": json.loads(aliases), "turn_ids": json.loads(ids)}
                  for key, kind, label, turns, community, centrality, aliases, ids
                  in data["entities"]],
        "edges": [{"source": src, "target": dst, "kind": kind, "turns": turns,
                   "turn_ids": json.loads(ids)} for src, dst, kind, turns, ids in data["edges"]],
    }
    if doc["detection"]:
        doc["detection"] = {k: v for k, v in doc["detection"].items() if k != "louvain_ms"}
    return json.dumps(doc, ensure_ascii=False, indent=1, sort_keys=True) + "\n"


class GraphExport(TypedDict):
    """The graphrag_export graph's output: the serialised graph (the command prints or
    saves it), its format and how many nodes and edges it holds."""

    document: str
    format: str
    entities: int
    edges: int


class ExportedGraphWrites(TypedDict):
    exported: dict[str, Any]
    reply: GraphExport


@node
def exported_graph(export_entities: Any, export_edges: Any, detection: Any,
                   export: dict[str, Any], rows: dict[str, int], *,
                   run: RunContext) -> ExportedGraphWrites:
    data = {"entities": export_entities, "edges": export_edges,
            "detection": detection}
    fmt = export["format"]
    document = _graphml(data) if fmt == "graphml" else _json(data)
    return {"exported": {"format": fmt, "chars": len(document)},
            "reply": GraphExport(document=document, format=fmt, entities=rows["entities"],
                                 edges=rows["edges"])}
