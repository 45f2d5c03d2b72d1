"""Forgetting, GraphRAG part: re-derive the graph around the forgotten turns.

The graph's counts are sums over turns (store.graph_batches): a turn's records depend
on its text and, for window co-occurrences, on the turn before it. An edge's count is of
observations, which its provenance rows do not determine (a window observation writes a
row for the turn before too), and alias mentions are per surface form. So the exact
repair is local re-extraction: around each run of forgotten turns, from the turn before
it to the second turn after it, the extraction's own ``batch_records`` are subtracted
(``subtract_page``: counts down, the rows of the turns whose rows change deleted) and
those of the remaining turns of the range, with the same window, written back
(``write_batch``). ``settle`` then recounts the touched entities from their rows,
removes what no turn supports any more (entities with their aliases and edges, aliases
and edges with nothing left), renames the survivors from their remaining aliases,
clears the communities (their labels quote entity labels) and marks the graph stale,
so that the next ``graphrag extract`` recomputes communities and centrality. The graph
then equals a full rebuild on the remaining turns; the cost follows the number of
forgotten turns, not the size of their sessions.

A turn in such a range that names entities but has no provenance rows was passed over
by ``graphrag extract --since`` (its records were never added): the whole graph is
reset instead (``reset_graph``) and the next extract rebuilds it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from store.graph_batches import (
    REFRESH_NAMES,
    BatchRecords,
    PendingTurn,
    graph_meta,
    set_graph_meta,
)
from store.sql import Conn, all_rows, first

__all__ = [
    "affected_graph_sessions",
    "read_ids",
    "read_turn_ids",
    "set_cursor",
    "settle",
    "subtract_page",
    "turns_by_ids",
    "uncount_turns",
]


SELECT_CURSOR = "SELECT through_id FROM graph_cursors WHERE session_id = ?"
# An id list bound as one JSON array (?, or ?1 where a statement uses it twice).
IDS = "(SELECT CAST(value AS INTEGER) FROM json_each(?))"
IDS1 = "(SELECT CAST(value AS INTEGER) FROM json_each(?1))"
SELECT_IDS = "SELECT id FROM exchanges WHERE session_id = ? AND id <= ? ORDER BY id"
SELECT_TURNS = f"""
SELECT id, session_id, content FROM exchanges WHERE id IN {IDS}
ORDER BY id"""
SET_CURSOR = "UPDATE graph_cursors SET through_id = ? WHERE session_id = ?"
READ_IDS = f"""
SELECT DISTINCT exchange_id FROM graph_entity_turns
WHERE exchange_id IN {IDS}"""
DELETE_ENTITY_ROWS = f"""
DELETE FROM graph_entity_turns WHERE exchange_id IN {IDS}"""
DELETE_EDGE_ROWS = f"""
DELETE FROM graph_edge_turns WHERE exchange_id IN {IDS}"""
ENTITY_IDS = "SELECT key, id FROM graph_entities WHERE key IN (SELECT value FROM json_each(?))"
SUBTRACT_ALIAS = """
UPDATE graph_aliases SET mentions = mentions - ? WHERE entity_id = ? AND surface = ? AND kind = ?"""
SUBTRACT_EDGE = "UPDATE graph_edges SET turns = turns - ? WHERE src = ? AND dst = ? AND kind = ?"
DELETE_CURSOR = "DELETE FROM graph_cursors WHERE session_id = ?"
RECOUNT = f"""
UPDATE graph_entities SET turns = (SELECT count(*) FROM graph_entity_turns t
                                   WHERE t.entity_id = graph_entities.id)
WHERE id IN {IDS}"""
UNSUPPORTED = f"""
SELECT id FROM graph_entities WHERE id IN {IDS} AND turns <= 0"""
# Each statement binds the JSON list of entity ids as ?1.
DROP_ENTITY_EDGE_ROWS = f"""
DELETE FROM graph_edge_turns WHERE edge_id IN (
  SELECT id FROM graph_edges WHERE src IN {IDS1}
                                OR dst IN {IDS1})"""
DROP_ENTITY_EDGES = f"""
DELETE FROM graph_edges WHERE src IN {IDS1}
                           OR dst IN {IDS1}"""
DROP_ENTITY_NAMES = (
    f"DELETE FROM graph_aliases WHERE entity_id IN {IDS1}",
    f"DELETE FROM graph_entities WHERE id IN {IDS1}")
DROP_ALIASES = f"""
DELETE FROM graph_aliases WHERE mentions <= 0
  AND entity_id IN {IDS}"""
UNOBSERVED_EDGES = f"""
SELECT id FROM graph_edges WHERE turns <= 0 AND (src IN {IDS1}
                                              OR dst IN {IDS1})"""
DROP_EDGES = (  # each binds the JSON list of edge ids
    f"DELETE FROM graph_edge_turns WHERE edge_id IN {IDS1}",
    f"DELETE FROM graph_edges WHERE id IN {IDS1}")
CLEAR_COMMUNITIES = """
DELETE FROM graph_communities; UPDATE graph_entities SET community = NULL, centrality = 0"""


def affected_graph_sessions(conn: Conn, turns: Iterable[tuple[int, int]]
                            ) -> list[tuple[int, int]]:
    """(session id, cursor) of each session whose read turns include one of ``turns``
    ((exchange id, session id)): its cursor is at or past the turn."""
    first_id: dict[int, int] = {}
    for exchange_id, session_id in turns:
        first_id[session_id] = min(first_id.get(session_id, exchange_id), exchange_id)
    out = []
    for session_id in sorted(first_id):
        row = first(conn, SELECT_CURSOR, (session_id,))
        if row is not None and int(row[0]) >= first_id[session_id]:
            out.append((session_id, int(row[0])))
    return out


def read_ids(conn: Conn, session_id: int, through: int) -> list[int]:
    """The ids of the session's stored turns up to its cursor, in order."""
    return [int(r[0]) for r in all_rows(conn, SELECT_IDS, (session_id, through))]


def turns_by_ids(conn: Conn, ids: Sequence[int]) -> list[PendingTurn]:
    """Stored turns (with their text), in id order."""
    return [PendingTurn(int(r[0]), int(r[1]), str(r[2]))
            for r in all_rows(conn, SELECT_TURNS, (json.dumps(list(ids)),))]


def set_cursor(conn: Conn, session_id: int, through: int | None) -> None:
    """The session's cursor after re-deriving: its last remaining read turn (as a rebuild
    would leave it), or none when no read turn remains."""
    if through is None:
        conn.execute(DELETE_CURSOR, (session_id,))
    else:
        conn.execute(SET_CURSOR, (through, session_id))


def read_turn_ids(conn: Conn, ids: Sequence[int]) -> set[int]:
    """Which of the turns have entity provenance rows (extraction read them)."""
    return {int(r[0]) for r in all_rows(conn, READ_IDS, (json.dumps(list(ids)),))}


def subtract_page(conn: Conn, records: BatchRecords, ids: Sequence[int]) -> None:
    """Take records out of the counts and delete the provenance rows of the turns
    ``ids`` (the rows that re-deriving rewrites). Call inside a write."""
    keys = sorted({k for k, _, _ in records.aliases}
                  | {k for a, b, _ in records.edges for k in (a, b)})
    entity = {str(k): int(i) for k, i in conn.execute(ENTITY_IDS, (json.dumps(keys),))}
    conn.executemany(SUBTRACT_ALIAS, [(n, entity[k], surface, kind)
                                      for (k, surface, kind), n in sorted(records.aliases.items())
                                      if k in entity])
    conn.executemany(SUBTRACT_EDGE, [(n, entity[a], entity[b], kind)
                                     for (a, b, kind), n in sorted(records.edges.items())
                                     if a in entity and b in entity])
    listed = json.dumps(list(ids))
    conn.execute(DELETE_ENTITY_ROWS, (listed,))
    conn.execute(DELETE_EDGE_ROWS, (listed,))


def uncount_turns(conn: Conn, turns_read: int) -> None:
    """Turns whose records were subtracted leave the read count."""
    read = max(int(graph_meta(conn, "turns_read") or 0) - turns_read, 0)
    set_graph_meta(conn, "turns_read", str(read))


def settle(conn: Conn, keys: Iterable[str]) -> dict[str, int]:
    """After re-deriving: recount, drop what nothing supports, rename the rest, clear
    the communities and mark the graph stale. Returns the entities and edges removed."""
    wanted = json.dumps(sorted(set(keys)))
    ids = sorted(int(r[1]) for r in conn.execute(ENTITY_IDS, (wanted,)))
    listed = json.dumps(ids)
    conn.execute(RECOUNT, (listed,))
    gone = [int(r[0]) for r in all_rows(conn, UNSUPPORTED, (listed,))]
    edges_removed = 0
    if gone:
        listed_gone = (json.dumps(gone),)
        conn.execute(DROP_ENTITY_EDGE_ROWS, listed_gone)
        conn.execute(DROP_ENTITY_EDGES, listed_gone)
        edges_removed += conn.changes()
        for statement in DROP_ENTITY_NAMES:
            conn.execute(statement, listed_gone)
    kept = json.dumps(sorted(set(ids) - set(gone)))
    conn.execute(DROP_ALIASES, (kept,))
    unobserved = [int(r[0]) for r in all_rows(conn, UNOBSERVED_EDGES, (kept,))]
    if unobserved:
        for statement in DROP_EDGES:
            conn.execute(statement, (json.dumps(unobserved),))
        edges_removed += len(unobserved)
    conn.execute(REFRESH_NAMES, (kept,))
    conn.execute(CLEAR_COMMUNITIES)
    set_graph_meta(conn, "stale", "1")
    return {"entities_removed": len(gone), "edges_removed": edges_removed}
