"""GraphRAG reads: the whole graph (communities, export), neighbourhoods (queries),
communities and the turns that support entities and edges; and the community write."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from store.graph_batches import graph_meta, set_graph_meta
from store.sql import Conn, Row, all_rows, first, one

__all__ = [
    "EntityRow",
    "community_edges",
    "community_members",
    "community_rows",
    "edge_support",
    "entities_by_ids",
    "entities_by_keys",
    "entity_support",
    "export_edges",
    "export_entities",
    "graph_counts",
    "neighbour_edges",
    "turn_entities",
    "whole_graph",
    "write_communities",
]

EntityRow = Row  # (id, key, kind, label, turns, community, centrality)
_ENTITY = "SELECT id, key, kind, label, turns, community, centrality FROM graph_entities"

COUNTS = """
SELECT (SELECT count(*) FROM graph_entities), (SELECT count(*) FROM graph_edges),
       (SELECT count(*) FROM graph_entity_turns), (SELECT count(*) FROM graph_edge_turns),
       (SELECT count(*) FROM graph_communities), (SELECT count(*) FROM graph_cursors)"""
KINDS = "SELECT kind, count(*) FROM graph_entities GROUP BY kind ORDER BY kind"
EDGE_KINDS = "SELECT kind, count(*), sum(turns) FROM graph_edges GROUP BY kind ORDER BY kind"
WHOLE_ENTITIES = "SELECT id, key, turns FROM graph_entities ORDER BY key"
WHOLE_EDGES = "SELECT src, dst, kind, turns FROM graph_edges"
CLEAR_COMMUNITIES = """
DELETE FROM graph_communities; UPDATE graph_entities SET community = NULL, centrality = 0"""
SET_ENTITY_RANK = "UPDATE graph_entities SET community = ?, centrality = ? WHERE id = ?"
INSERT_COMMUNITY = "INSERT INTO graph_communities(id, size, label) VALUES (?, ?, ?)"
BY_KEYS = _ENTITY + " WHERE key IN (SELECT value FROM json_each(?1))"
IN_SESSION = """ AND EXISTS (SELECT 1 FROM graph_entity_turns t
  WHERE t.session_id = ?2 AND t.entity_id = graph_entities.id)"""
BY_IDS = _ENTITY + " WHERE id IN (SELECT CAST(value AS INTEGER) FROM json_each(?))"
# The most observed edges at one end of an entity: an index walk, newest id first on ties.
NEIGHBOURS = """
SELECT e.id, e.src, e.dst, e.kind, e.turns FROM graph_edges e
WHERE e.{end} = ?1 AND (?2 IS NULL OR EXISTS (
  SELECT 1 FROM graph_edge_turns t WHERE t.edge_id = e.id AND t.session_id = ?2))
ORDER BY e.turns DESC LIMIT ?3"""
_NEIGHBOURS = {end: NEIGHBOURS.format(end=end) for end in ("src", "dst")}
# In a session: the edges at an entity that its turns in the session support (from the
# entity's session turns to their edges, both by index), the most observed first.
SESSION_NEIGHBOURS = """
SELECT DISTINCT e.id, e.src, e.dst, e.kind, e.turns
FROM graph_entity_turns et
JOIN graph_edge_turns t ON t.exchange_id = et.exchange_id
JOIN graph_edges e ON e.id = t.edge_id
WHERE et.session_id = ?2 AND et.entity_id = ?1 AND (e.src = ?1 OR e.dst = ?1)
ORDER BY e.turns DESC, e.id LIMIT ?3"""
# The newest supporting turns of one edge or entity: a walk down its primary key (or, in
# a session, down the session index).
EDGE_SUPPORT = """
SELECT exchange_id FROM graph_edge_turns WHERE edge_id = ?1 AND (?2 IS NULL OR session_id = ?2)
ORDER BY exchange_id DESC LIMIT ?3"""
ENTITY_SUPPORT = """
SELECT exchange_id FROM graph_entity_turns WHERE entity_id = ?1
ORDER BY exchange_id DESC LIMIT ?3"""
ENTITY_SUPPORT_IN_SESSION = """
SELECT exchange_id FROM graph_entity_turns WHERE session_id = ?2 AND entity_id = ?1
ORDER BY exchange_id DESC LIMIT ?3"""
TURN_ENTITIES = """
SELECT entity_id, exchange_id FROM graph_entity_turns
WHERE exchange_id IN (SELECT CAST(value AS INTEGER) FROM json_each(?1))
  AND entity_id IN (SELECT CAST(value AS INTEGER) FROM json_each(?2))"""
COMMUNITIES = "SELECT id, size, label FROM graph_communities ORDER BY id LIMIT ? OFFSET ?"
COMMUNITY = "SELECT id, size, label FROM graph_communities WHERE id = ?"
MEMBERS = _ENTITY + " WHERE community = ? ORDER BY centrality DESC, key LIMIT ?"
COMMUNITY_EDGES = """
SELECT e.id, e.src, e.dst, e.kind, e.turns FROM graph_entities a
JOIN graph_edges e ON e.src = a.id JOIN graph_entities b ON b.id = e.dst
WHERE a.community = ?1 AND b.community = ?1
ORDER BY e.turns DESC, e.id LIMIT ?2"""
EXPORT_ENTITIES = """
SELECT e.key, e.kind, e.label, e.turns, e.community, e.centrality,
       (SELECT json_group_array(surface) FROM (SELECT DISTINCT surface FROM graph_aliases a
        WHERE a.entity_id = e.id ORDER BY surface)),
       (SELECT json_group_array(exchange_id) FROM (SELECT exchange_id FROM graph_entity_turns t
        WHERE t.entity_id = e.id ORDER BY exchange_id))
FROM graph_entities e ORDER BY e.key"""
EXPORT_EDGES = """
SELECT a.key, b.key, e.kind, e.turns,
       (SELECT json_group_array(exchange_id) FROM (SELECT exchange_id FROM graph_edge_turns t
        WHERE t.edge_id = e.id ORDER BY exchange_id))
FROM graph_edges e JOIN graph_entities a ON a.id = e.src JOIN graph_entities b ON b.id = e.dst
ORDER BY a.key, b.key, e.kind"""


def graph_counts(conn: Conn) -> dict[str, Any]:
    row = one(conn, COUNTS)
    keys = ("entities", "edges", "entity_turns", "edge_turns", "communities", "sessions")
    out: dict[str, Any] = dict(zip(keys, (int(v) for v in row), strict=True))
    out["turns_read"] = int(graph_meta(conn, "turns_read") or 0)
    out["stale"] = graph_meta(conn, "stale") == "1"
    detection = graph_meta(conn, "detection")
    out["detection"] = json.loads(detection) if detection else None
    out["entity_kinds"] = {str(k): int(n) for k, n in all_rows(conn, KINDS)}
    out["edge_kinds"] = {str(k): {"edges": int(n), "observations": int(t)}
                         for k, n, t in all_rows(conn, EDGE_KINDS)}
    return out


def whole_graph(conn: Conn) -> tuple[list[Row], list[Row]]:
    """Every entity (id, key, turns), in key order, and every edge (src, dst, kind,
    turns)."""
    return all_rows(conn, WHOLE_ENTITIES), all_rows(conn, WHOLE_EDGES)


def write_communities(conn: Conn, ranks: Sequence[tuple[int | None, float, int]],
                      communities: Sequence[tuple[int, int, str]], detection: dict[str, Any]
                      ) -> None:
    """Replace the detected communities; ``ranks`` is (community, centrality, entity id)."""
    conn.execute(CLEAR_COMMUNITIES)
    conn.executemany(INSERT_COMMUNITY, communities)
    conn.executemany(SET_ENTITY_RANK, ranks)
    set_graph_meta(conn, "detection", json.dumps(detection, sort_keys=True))
    set_graph_meta(conn, "stale", "0")


def entities_by_keys(conn: Conn, keys: Sequence[str], session_id: int | None
                     ) -> list[EntityRow]:
    sql = BY_KEYS + (IN_SESSION if session_id is not None else "")
    params: tuple[Any, ...] = (json.dumps(list(keys)),)
    if session_id is not None:
        params += (session_id,)
    return all_rows(conn, sql + " ORDER BY key", params)


def entities_by_ids(conn: Conn, ids: Sequence[int]) -> dict[int, EntityRow]:
    return {int(r[0]): r for r in all_rows(conn, BY_IDS, (json.dumps(list(ids)),))}


def neighbour_edges(conn: Conn, ids: Sequence[int], session_id: int | None,
                    per_node: int) -> list[Row]:
    """Edges (id, src, dst, kind, turns) at ``ids``: the ``per_node`` most observed on
    each side of each entity, supported in the session when one is given."""
    if session_id is not None:
        rows = {r[0]: r for entity_id in ids
                for r in all_rows(conn, SESSION_NEIGHBOURS, (entity_id, session_id,
                                                              2 * per_node))}
    else:
        rows = {r[0]: r for entity_id in ids for end in ("src", "dst")
                for r in all_rows(conn, _NEIGHBOURS[end], (entity_id, None, per_node))}
    return [rows[k] for k in sorted(rows)]


def _support(conn: Conn, sql: str, ids: Sequence[int], session_id: int | None,
             per_item: int) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for item in ids:
        found = [int(r[0]) for r in conn.execute(sql, (item, session_id, per_item))]
        if found:
            out[int(item)] = found
    return out


def edge_support(conn: Conn, ids: Sequence[int], session_id: int | None,
                 per_edge: int) -> dict[int, list[int]]:
    """The newest ``per_edge`` supporting turn ids of each edge."""
    return _support(conn, EDGE_SUPPORT, ids, session_id, per_edge)


def entity_support(conn: Conn, ids: Sequence[int], session_id: int | None,
                   per_entity: int) -> dict[int, list[int]]:
    sql = ENTITY_SUPPORT if session_id is None else ENTITY_SUPPORT_IN_SESSION
    return _support(conn, sql, ids, session_id, per_entity)


def turn_entities(conn: Conn, exchange_ids: Sequence[int],
                  entity_ids: Sequence[int]) -> list[tuple[int, int]]:
    """(entity id, exchange id) pairs: which of ``entity_ids`` each turn mentions."""
    rows = all_rows(conn, TURN_ENTITIES, (json.dumps(list(exchange_ids)),
                                          json.dumps(list(entity_ids))))
    return [(int(a), int(b)) for a, b in rows]


def community_rows(conn: Conn, limit: int, offset: int = 0) -> list[Row]:
    return all_rows(conn, COMMUNITIES, (limit, offset))


def community_row(conn: Conn, community_id: int) -> Row | None:
    return first(conn, COMMUNITY, (community_id,))


def community_members(conn: Conn, community_id: int, limit: int
                      ) -> list[EntityRow]:
    return all_rows(conn, MEMBERS, (community_id, limit))


def community_edges(conn: Conn, community_id: int, limit: int) -> list[Row]:
    return all_rows(conn, COMMUNITY_EDGES, (community_id, limit))


def export_entities(conn: Conn) -> list[Row]:
    """(key, kind, label, turns, community, centrality, aliases JSON, turn ids JSON)."""
    return all_rows(conn, EXPORT_ENTITIES)


def export_edges(conn: Conn) -> list[Row]:
    """(source key, target key, kind, turns, turn ids JSON)."""
    return all_rows(conn, EXPORT_EDGES)
