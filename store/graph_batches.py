"""GraphRAG extraction batches: which turns are pending, and writing one batch.

A session's cursor (``graph_cursors.through_id``) is the id up to which its turns were
read; a batch reads the pending turns of each session in id order, and its writes and
the cursors move in one transaction, so a batch interrupted by Ctrl-C leaves nothing
behind and the next run reads the same turns again.

Counts are additive, so batches of any size give the same graph: an entity's
``turns`` is the number of turns that mention it; an edge's ``turns`` the number of
turns at which it was observed (a co-occurrence in the turn, or across it and the
turn before; a typed relation in it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from store.dialect import dialect
from store.errors import StoreError
from store.sql import Conn, all_rows, first, one

__all__ = [
    "BatchRecords",
    "PendingTurn",
    "count_pending",
    "graph_meta",
    "pending_turns",
    "previous_turn",
    "reset_graph",
    "write_batch",
]

KIND_ORDER = "url file issue package code speaker name phrase"


@dataclass(frozen=True)
class PendingTurn:
    id: int
    session_id: int
    content: str


@dataclass
class BatchRecords:
    """What one batch adds to the graph (built by nodes.extract.graph_records)."""

    turns_read: int = 0
    # (key, surface, kind) -> mentions (turns mentioning it with that surface)
    aliases: dict[tuple[str, str, str], int] = field(default_factory=dict)
    # (key, exchange id, session id)
    entity_turns: list[tuple[str, int, int]] = field(default_factory=list)
    # (src key, dst key, kind) -> turns at which it was observed in this batch
    edges: dict[tuple[str, str, str], int] = field(default_factory=dict)
    # (src key, dst key, kind) -> the exchange ids it cites (a turn may repeat)
    edge_turns: dict[tuple[str, str, str], list[int]] = field(default_factory=dict)
    sessions: dict[int, int] = field(default_factory=dict)  # cited exchange id -> session id
    cursors: dict[int, int] = field(default_factory=dict)  # session id -> last id read

    def edge_turn_count(self) -> int:
        return sum(map(len, self.edge_turns.values()))

    def __repr__(self) -> str:  # sizes only: the stage trace summarises a channel write
        return (f"BatchRecords(turns_read={self.turns_read}, aliases={len(self.aliases)}, "
                f"entity_turns={len(self.entity_turns)}, edges={len(self.edges)}, "
                f"edge_turns={self.edge_turn_count()}, cursors={len(self.cursors)})")


SESSIONS_WITH_CURSORS = """
SELECT s.id, coalesce(c.through_id, 0) FROM sessions s
LEFT JOIN graph_cursors c ON c.session_id = s.id
WHERE ?1 IS NULL OR s.name = ?1 ORDER BY s.id"""
PENDING_OF_SESSION = """
SELECT id, session_id, content FROM exchanges
WHERE session_id = ?1 AND id > ?2 AND (?3 IS NULL OR created_at >= ?3) ORDER BY id LIMIT ?4"""
SKIPPED_THROUGH = """
SELECT max(id) FROM exchanges WHERE session_id = ?1 AND id > ?2 AND created_at < ?3"""
COUNT_PENDING = """
SELECT count(*) FROM exchanges e JOIN sessions s ON s.id = e.session_id
LEFT JOIN graph_cursors c ON c.session_id = e.session_id
WHERE e.id > coalesce(c.through_id, 0) AND (?1 IS NULL OR s.name = ?1)
  AND (?2 IS NULL OR e.created_at >= ?2)"""
PREVIOUS_TURN = """
SELECT id, session_id, content FROM exchanges WHERE session_id = ? AND id < ?
ORDER BY id DESC LIMIT 1"""

INSERT_ENTITY = """
INSERT INTO graph_entities(key, kind, label) VALUES (?, ?, ?) ON CONFLICT(key) DO NOTHING"""
ENTITY_IDS = "SELECT key, id FROM graph_entities WHERE key IN (SELECT value FROM json_each(?))"
UPSERT_ALIAS = """
INSERT INTO graph_aliases(entity_id, surface, kind, mentions) VALUES (?, ?, ?, ?)
ON CONFLICT(entity_id, surface, kind)
  DO UPDATE SET mentions = graph_aliases.mentions + excluded.mentions"""
# Provenance rows of one session, bound as one array of ``id << 32 | exchange id`` values
# read from the dialect's table of integers ``{ints}`` (carray on SQLite, an array
# parameter on PostgreSQL: no Python call per row).
_INSERT_PACKED = """
INSERT INTO {table} SELECT value >> 32, value & 4294967295, ?2
FROM {ints} WHERE true ON CONFLICT DO NOTHING"""
INSERT_ENTITY_TURNS = _INSERT_PACKED.replace("{table}", "graph_entity_turns")
ADD_ENTITY_TURNS = "UPDATE graph_entities SET turns = turns + ? WHERE id = ?"
# The label is the most mentioned surface form, the kind the most mentioned kind (ties:
# the first surface in code-point order, the first kind in KIND_ORDER).
REFRESH_NAMES = f"""
UPDATE graph_entities SET
  label = (SELECT surface FROM graph_aliases a WHERE a.entity_id = graph_entities.id
           GROUP BY surface ORDER BY sum(mentions) DESC, surface LIMIT 1),
  kind = (SELECT kind FROM graph_aliases a WHERE a.entity_id = graph_entities.id
          GROUP BY kind ORDER BY sum(mentions) DESC, instr('{KIND_ORDER}', kind) LIMIT 1)
WHERE id IN (SELECT CAST(value AS INTEGER) FROM json_each(?))"""
UPSERT_EDGE = """
INSERT INTO graph_edges(src, dst, kind, turns) VALUES (?, ?, ?, ?)
ON CONFLICT(src, dst, kind)
  DO UPDATE SET turns = graph_edges.turns + excluded.turns"""
# The ids of the edges of one kind, given as ``src << 32 | dst`` values (one lookup of
# the unique index each; a RETURNING clause on the upsert costs SQLite more).
EDGE_IDS = """
SELECT e.src, e.dst, e.id FROM {ints} CROSS JOIN graph_edges e
WHERE e.src = value >> 32 AND e.dst = value & 4294967295 AND e.kind = ?2"""
INSERT_EDGE_TURNS = _INSERT_PACKED.replace("{table}", "graph_edge_turns")
UPSERT_CURSOR = """
INSERT INTO graph_cursors(session_id, through_id) VALUES (?, ?)
ON CONFLICT(session_id)
  DO UPDATE SET through_id = max(graph_cursors.through_id, excluded.through_id)"""
GET_META = "SELECT value FROM meta WHERE key = ?"
SET_META = """
INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value"""
RESET = """
DELETE FROM graph_entities; DELETE FROM graph_aliases; DELETE FROM graph_entity_turns;
DELETE FROM graph_edges; DELETE FROM graph_edge_turns; DELETE FROM graph_cursors;
DELETE FROM graph_communities; DELETE FROM meta WHERE key LIKE 'graphrag_%'"""


def pending_turns(conn: Conn, session: str | None, since: float | None, limit: int,
                  after: Mapping[int, int] | None = None
                  ) -> tuple[list[PendingTurn], dict[int, int]]:
    """Up to ``limit`` unread turns, session by session in id order, and the cursors
    that turns older than ``since`` move to (they are passed over, not read).
    ``after`` (session id -> last id) counts those turns as read too: the batch after
    one that is not written yet."""
    out: list[PendingTurn] = []
    skipped: dict[int, int] = {}
    for session_id, through in all_rows(conn, SESSIONS_WITH_CURSORS, (session,)):
        if len(out) >= limit:
            break
        if after:
            through = max(int(through), after.get(int(session_id), 0))
        if since is not None:
            passed = first(conn, SKIPPED_THROUGH, (session_id, through, since))
            if passed is not None and passed[0] is not None:
                skipped[session_id] = int(passed[0])
        rows = all_rows(conn, PENDING_OF_SESSION, (session_id, through, since,
                                                   limit - len(out)))
        out.extend(PendingTurn(int(r[0]), int(r[1]), str(r[2])) for r in rows)
    return out, skipped


def count_pending(conn: Conn, session: str | None, since: float | None) -> int:
    return int(one(conn, COUNT_PENDING, (session, since))[0])


def previous_turn(conn: Conn, session_id: int, before_id: int
                  ) -> PendingTurn | None:
    row = first(conn, PREVIOUS_TURN, (session_id, before_id))
    return None if row is None else PendingTurn(int(row[0]), int(row[1]), str(row[2]))


def graph_meta(conn: Conn, name: str) -> str | None:
    row = first(conn, GET_META, (f"graphrag_{name}",))
    return None if row is None else str(row[0])


def set_graph_meta(conn: Conn, name: str, value: str) -> None:
    conn.execute(SET_META, (f"graphrag_{name}", value))


def _entity_ids(conn: Conn, keys: Sequence[str]) -> dict[str, int]:
    return {str(k): int(i) for k, i in conn.execute(ENTITY_IDS, (json.dumps(list(keys)),))}


def _edge_ids(conn: Conn, ends: Sequence[tuple[int, str]]) -> dict[tuple[int, str], int]:
    """The ids of stored edges given as ``(src << 32 | dst, kind)``."""
    by_kind: dict[str, list[int]] = {}
    for packed, kind in ends:
        by_kind.setdefault(kind, []).append(packed)
    sql_dialect = dialect(conn)
    sql = EDGE_IDS.replace("{ints}", sql_dialect.int_table)
    return {(int(src) << 32 | int(dst), kind): int(edge_id)
            for kind, values in sorted(by_kind.items())
            for src, dst, edge_id in conn.execute(sql, (sql_dialect.int_array(values), kind))}


_PACKED_ID_LIMIT = 2**31  # an entity or edge id above the exchange id's 32 bits


def _insert_packed(conn: Conn, sql: str, rows: dict[int, list[int]]) -> None:
    """Insert provenance rows given per session as ``id << 32 | exchange id``, in key
    order (B-tree inserts then meet each page once)."""
    sql_dialect = dialect(conn)
    sql = sql.replace("{ints}", sql_dialect.int_table)
    for session_id, values in sorted(rows.items()):
        values.sort()
        if values[-1] >> 32 >= _PACKED_ID_LIMIT:
            raise StoreError(f"graphrag: id {values[-1] >> 32} is too large to pack")
        conn.execute(sql, (sql_dialect.int_array(values), session_id))


def write_batch(conn: Conn, records: BatchRecords) -> dict[str, int]:
    """Add one batch to the graph and move the cursors. Call inside a write."""
    dialect(conn).prepare_bulk_write(conn)
    if records.sessions and max(records.sessions) >> 32:
        raise StoreError(f"graphrag: exchange id {max(records.sessions)} is too large to pack")
    keys = sorted({k for k, _, _ in records.aliases})
    first_names: dict[str, tuple[str, str]] = {}
    for (key, surface, kind) in records.aliases:
        first_names.setdefault(key, (kind, surface))
    conn.executemany(INSERT_ENTITY, [(k, *first_names[k]) for k in keys])
    ids = _entity_ids(conn, keys)
    conn.executemany(UPSERT_ALIAS, [(ids[k], s, kind, n)
                                    for (k, s, kind), n in sorted(records.aliases.items())])
    per_entity: dict[int, int] = {}
    rows: dict[int, list[int]] = {}
    for key, exchange_id, session_id in records.entity_turns:
        entity_id = ids[key]
        per_entity[entity_id] = per_entity.get(entity_id, 0) + 1
        if session_id in rows:
            rows[session_id].append(entity_id << 32 | exchange_id)
        else:
            rows[session_id] = [entity_id << 32 | exchange_id]
    _insert_packed(conn, INSERT_ENTITY_TURNS, rows)
    conn.executemany(ADD_ENTITY_TURNS, [(n, i) for i, n in sorted(per_entity.items())])
    conn.execute(REFRESH_NAMES, (json.dumps(sorted(ids.values())),))
    # A window edge may end at an entity of the turn before the batch (stored by an
    # earlier batch); one whose end is not stored (that turn was passed over) is dropped.
    ends = sorted({k for a, b, _ in records.edges for k in (a, b)} - ids.keys())
    ids.update(_entity_ids(conn, ends))
    edge_keys = sorted(e for e in records.edges if e[0] in ids and e[1] in ids)
    rows = {session_id: [] for session_id in records.sessions.values()}
    if edge_keys:
        conn.executemany(UPSERT_EDGE, [
            (ids[a], ids[b], kind, records.edges[(a, b, kind)]) for a, b, kind in edge_keys])
        pairs = [(ids[a] << 32 | ids[b], kind) for a, b, kind in edge_keys]
        edge_ids = _edge_ids(conn, pairs)
        # A cited turn's values go to its session's list (one lookup per value).
        session_rows = {exchange_id: rows[session_id]
                        for exchange_id, session_id in records.sessions.items()}
        edge_turns = records.edge_turns
        for edge, pair in zip(edge_keys, pairs, strict=True):
            high = edge_ids[pair] << 32
            for exchange_id in edge_turns.get(edge, ()):
                session_rows[exchange_id].append(high | exchange_id)
    _insert_packed(conn, INSERT_EDGE_TURNS, {s: values for s, values in rows.items() if values})
    conn.executemany(UPSERT_CURSOR, sorted(records.cursors.items()))
    read = int(graph_meta(conn, "turns_read") or 0) + records.turns_read
    set_graph_meta(conn, "turns_read", str(read))
    if records.turns_read:
        set_graph_meta(conn, "stale", "1")
    return {"entities": len(keys), "edges": len(edge_keys), "turns_read": read}


def reset_graph(conn: Conn) -> dict[str, int]:
    """Forget the whole derived graph (the turns stay); the next run reads every turn."""
    counts = {"entities": int(one(conn, "SELECT count(*) FROM graph_entities")[0]),
              "edges": int(one(conn, "SELECT count(*) FROM graph_edges")[0])}
    conn.execute(RESET)
    return counts
