"""Nodes: read the GraphRAG evidence — pending turns of a batch, the whole graph, a
query's entities and neighbourhood, communities, export rows and counts.

Bulk reads (turns, entity and edge rows) are written to channels of their own as plain
values: the graph runner keeps them out of the engine's state (docs/neograph.md rule 5),
so the counts channels stay small for the stage trace.
"""

from __future__ import annotations

from typing import Any, TypedDict

from nodes.context import Cfg, RunContext, node
from nodes.evaluate_contracts.inputs import iso
from nodes.extract.entities import query_keys
from store.exchanges import exchanges_by_ids
from store.graph_batches import (
    PendingTurn,
    count_pending,
    graph_meta,
    pending_turns,
    previous_turn,
)
from store.graph_reads import (
    community_edges,
    community_members,
    community_row,
    community_rows,
    edge_support,
    entities_by_ids,
    entities_by_keys,
    entity_support,
    export_edges,
    export_entities,
    graph_counts,
    neighbour_edges,
    turn_entities,
    whole_graph,
)
from store.sql import Conn

__all__ = ["community_evidence", "community_list", "export_rows", "graph_batch_turns",
           "graph_neighbourhood", "graph_seeds", "graph_stats", "graph_support",
           "whole_graph_evidence"]

MAX_SEEDS = 32
PER_NODE = 25  # edges followed per entity end and hop (the most observed)
MAX_NODES = 1_500
FRONTIER = 48  # entities a further hop starts from


class GraphBatchTurnsWrites(TypedDict):
    batch: Any
    pending: Any
    window: Any
    skipped: Any
    lookahead: Any
    lookahead_window: Any


@node
def graph_batch_turns(batch_request: Any, *, run: RunContext) -> GraphBatchTurnsWrites:
    """The batch's turns and, per session, the turn before its first (the window). When
    the next batch is big enough to extract in the worker process while this one is
    written (``graphrag_prefetch``), its turns and window too (``lookahead``)."""
    req = batch_request
    size, session, since = req["batch_size"], req["session"], req["since"]
    ahead = run.settings.graphrag_prefetch if run.graph_prefetch else 0
    with run.store.read() as conn:
        turns, skipped = pending_turns(conn, session, since, size)
        previous = _windows(conn, turns)
        remaining = max(0, count_pending(conn, session, since) - len(turns))
        following: list[PendingTurn] = []
        if ahead and min(remaining, size) >= ahead:
            read = {t.session_id: t.id for t in turns}  # in id order: the last one stays
            following, _ = pending_turns(conn, session, since, size, after=read)
        following_window = _windows(conn, following)
    return {"batch": {"turns": len(turns), "sessions": len(previous),
                      "first_id": turns[0].id if turns else None,
                      "last_id": turns[-1].id if turns else None,
                      "remaining": remaining},
            "pending": turns, "window": previous, "skipped": skipped,
            "lookahead": following,
            "lookahead_window": following_window}


def _windows(conn: Conn, turns: list[PendingTurn]) -> dict[int, PendingTurn | None]:
    """Per session of ``turns``, the turn just before its first one there."""
    firsts: dict[int, int] = {}
    for turn in turns:
        firsts.setdefault(turn.session_id, turn.id)
    return {s: previous_turn(conn, s, first_id) for s, first_id in firsts.items()}


class WholeGraphEvidenceWrites(TypedDict):
    graph: Any
    graph_entities: Any
    graph_edges: Any


@node
def whole_graph_evidence(*, run: RunContext) -> WholeGraphEvidenceWrites:
    with run.store.read() as conn:
        entities, edges = whole_graph(conn)
        total = int(graph_meta(conn, "turns_read") or 0)
    return {"graph": {"entities": len(entities), "edges": len(edges), "turns_read": total},
            "graph_entities": entities, "graph_edges": edges}


class GraphSeedsWrites(TypedDict):
    seeds: Any


@node
def graph_seeds(graph_query: Any, *, run: RunContext) -> GraphSeedsWrites:
    """The stored entities that the query names (within the session when scoped)."""
    query = graph_query
    keys = query_keys(query["text"])
    with run.store.read() as conn:
        rows = entities_by_keys(conn, keys, query["session_row"])
    order = {k: i for i, k in enumerate(keys)}
    rows.sort(key=lambda r: order[r[1]])
    return {"seeds": [[int(r[0]), str(r[1]), int(r[4])] for r in rows[:MAX_SEEDS]]}


class GraphNeighbourhoodWrites(TypedDict):
    neighbourhood: Any
    hood_entities: Any
    hood_edges: Any


@node
def graph_neighbourhood(graph_query: Any, seeds: Any, *,
                        run: RunContext) -> GraphNeighbourhoodWrites:
    """Entities and edges within ``hops`` of the seeds (bounded per entity and in all)."""
    query = graph_query
    seeds = [s[0] for s in seeds or []]
    nodes, frontier = set(seeds), list(seeds)
    edges: dict[int, tuple[int, int, int, str, int]] = {}
    with run.store.read() as conn:
        for _ in range(query["hops"]):
            if not frontier or len(nodes) >= MAX_NODES:
                break
            found = neighbour_edges(conn, frontier, query["session_row"], PER_NODE)
            reached: dict[int, int] = {}
            for row in found:
                edge_id, src, dst, kind, turns = (int(row[0]), int(row[1]), int(row[2]),
                                                  str(row[3]), int(row[4]))
                edges[edge_id] = (edge_id, src, dst, kind, turns)
                for end in (src, dst):
                    if end not in nodes:
                        reached[end] = max(reached.get(end, 0), turns)
            ranked = sorted(reached, key=lambda n: (-reached[n], n))[:MAX_NODES - len(nodes)]
            nodes.update(ranked)
            frontier = ranked[:FRONTIER]  # the next hop starts from the best-linked only
        entities = entities_by_ids(conn, sorted(nodes))
        total = int(graph_meta(conn, "turns_read") or 0)
    kept = [e for e in edges.values() if e[1] in entities and e[2] in entities]
    return {"neighbourhood": {"entities": len(entities), "edges": len(kept), "turns_read": total},
            "hood_entities": entities, "hood_edges": kept}


class GraphStatsWrites(TypedDict):
    stats: Any


@node
def graph_stats(*, run: RunContext) -> GraphStatsWrites:
    with run.store.read() as conn:
        counts = graph_counts(conn)
        counts["pending"] = count_pending(conn, None, None)
    return {"stats": counts}


class CommunityListWrites(TypedDict):
    communities: list[dict[str, Any]]
    total: int


@node
def community_list(listing: dict[str, Any], *, run: RunContext) -> CommunityListWrites:
    out = []
    with run.store.read() as conn:
        total = graph_counts(conn)["communities"]
        for cid, size, label in community_rows(conn, listing["limit"], listing["offset"]):
            members = community_members(conn, int(cid), 5)
            out.append({"id": int(cid), "size": int(size), "label": str(label),
                        "top_entities": [str(m[3]) for m in members]})
    return {"communities": out, "total": total}


class CommunityEvidenceWrites(TypedDict):
    community: Any
    community_turns: Any


@node
def community_evidence(community_id: Any, *, run: RunContext, cfg: Cfg) -> CommunityEvidenceWrites:
    """One community: its members, strongest relations, and the turns behind them."""
    from store.errors import NotFound

    cid = community_id
    limit = int(cfg.get("members", 25))
    with run.store.read() as conn:
        row = community_row(conn, cid)
        if row is None:
            raise NotFound(f"no community {cid}; list them with `stenographer graphrag "
                           "communities` (run `graphrag extract` first)")
        members = community_members(conn, cid, limit)
        relations = community_edges(conn, cid, 15)
        names = entities_by_ids(conn, sorted({int(r[1]) for r in relations}
                                             | {int(r[2]) for r in relations}))
        support = edge_support(conn, [int(r[0]) for r in relations], None, 3)
        member_support = entity_support(conn, [int(m[0]) for m in members], None, 5)
        turn_ids = sorted({t for ids in (*support.values(), *member_support.values())
                           for t in ids})
        turns = exchanges_by_ids(conn, turn_ids)
    community = {
        "id": int(row[0]), "size": int(row[1]), "label": str(row[2]),
        "entities": [{"key": str(m[1]), "kind": str(m[2]), "label": str(m[3]),
                      "turns": int(m[4]), "centrality": round(float(m[6]), 6),
                      "turn_ids": member_support.get(int(m[0]), [])} for m in members],
        "relations": [{"source": str(names[int(r[1])][3]), "target": str(names[int(r[2])][3]),
                       "kind": str(r[3]), "turns": int(r[4]),
                       "turn_ids": support.get(int(r[0]), [])} for r in relations],
        "keys": [str(m[1]) for m in members],
    }
    return {"community": community, "community_turns": turns}


class ExportRowsWrites(TypedDict):
    rows: Any
    export_entities: Any
    export_edges: Any
    detection: Any


@node
def export_rows(*, run: RunContext) -> ExportRowsWrites:
    with run.store.read() as conn:
        entities, edges = export_entities(conn), export_edges(conn)
        detection = graph_counts(conn)["detection"]
    return {"rows": {"entities": len(entities), "edges": len(edges)},
            "export_entities": entities, "export_edges": edges, "detection": detection}


class GraphSupportWrites(TypedDict):
    graph_result: Any


@node
def graph_support(graph_query: Any, top_entities: Any, top_relations: Any, hood_entities: Any, *,
                  run: RunContext) -> GraphSupportWrites:
    """The turns behind the ranked entities and relations, best first: a turn scores the
    ranks of the top entities it names. Each entity and relation keeps its newest
    supporting turn ids; the answer lists the turns with their provenance."""
    query = graph_query
    top, relations = top_entities, top_relations
    entities: dict[int, Any] = hood_entities
    session_row = query["session_row"]
    score = dict(top)
    with run.store.read() as conn:
        by_entity = entity_support(conn, [e for e, _ in top], session_row, 5)
        by_edge = edge_support(conn, [r[0] for r in relations], session_row, 5)
        candidates = sorted({t for ids in (*by_entity.values(), *by_edge.values())
                             for t in ids})
        named: dict[int, float] = {}
        for entity_id, exchange_id in turn_entities(conn, candidates, list(score)):
            named[exchange_id] = named.get(exchange_id, 0.0) + score[entity_id]
        best = sorted(named, key=lambda t: (-named[t], -t))[:query["limit"]]
        turns = exchanges_by_ids(conn, best)
        communities = {int(c[0]): c for c in community_rows(conn, 10_000)} \
            if any(entities[e][5] is not None for e, _ in top) else {}
    label = {e: str(entities[e][3]) for e in entities}
    out_entities = [{"key": str(entities[e][1]), "label": label[e], "kind": str(entities[e][2]),
                     "score": round(s, 6), "turns": int(entities[e][4]),
                     "community": entities[e][5], "turn_ids": by_entity.get(e, [])}
                    for e, s in top]
    out_relations = [{"source": label[src], "target": label[dst], "kind": kind, "turns": n,
                      "turn_ids": by_edge.get(edge_id, [])}
                     for edge_id, src, dst, kind, n in relations]
    seen_communities = sorted({e["community"] for e in out_entities if e["community"]})
    out_communities = [{"id": c, "size": int(communities[c][1]),
                        "label": str(communities[c][2])}
                       for c in seen_communities if c in communities]
    out_turns = [{"exchange_id": t, "session_id": turns[t].session, "role": turns[t].role,
                  "created_at": iso(turns[t].created_at), "score": round(named[t], 6),
                  "snippet": _snippet(turns[t].content), "brief_id": turns[t].brief_id}
                 for t in best if t in turns]
    return {"graph_result": {"entities": out_entities, "relations": out_relations,
                             "communities": out_communities, "turns": out_turns}}


def _snippet(text: str, limit: int = 240) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
