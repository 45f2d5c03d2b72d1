"""Copying a whole store into another one, SQLite or PostgreSQL (`stenographer migrate`).

Every table the product uses is read from the source in key order, a bounded page at a
time, and written to the target with its ids, so that provenance (exchange ids, brief
sources, chain hashes, milestones, GraphRAG citations) stays valid. What the backends
keep differently is converted on the way: the keyword index is rebuilt from each turn's
text in the target's form (FTS5 columns on SQLite, one weighted tsvector on
PostgreSQL); the hashed vectors are copied (int8 on SQLite and pgvector's halfvec on
PostgreSQL hold the same integers). Stage traces keep their run ids; the target numbers
them after its own (``runs.seq`` is an order, never a reference).

How far the copy has come lives in the target, in the ``meta`` row ``migration``, and
changes in the same transaction as each page it covers: an interrupted copy (Ctrl-C,
SIGKILL, a lost connection) resumes after the last committed page, and a page is never
written twice. A target that holds records but no such row, or one naming another
source, is not touched.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from store.dialect import dialect
from store.exchanges import index_keyword_page
from store.keyword_index import META_KEY as KEYWORD_INDEX_KEY
from store.provenance import GENESIS
from store.rewrite import REWRITE_KEYS
from store.sql import Conn, Row, all_rows, first, id_list

__all__ = [
    "MIGRATION_KEY",
    "TABLES",
    "Table",
    "TurnEvidence",
    "claim_target",
    "defer_indexes",
    "finish_target",
    "held_records",
    "key_of",
    "read_page",
    "read_progress",
    "save_progress",
    "table_counts",
    "turn_evidence",
    "vector_dim",
    "write_page",
    "write_turns",
]

MIGRATION_KEY = "migration"  # the target's meta row that records the copy's progress
# The target's own, never the source's (its file's rewrite after a forget included).
# The derived keyword index's id names one file's index directory: never copied either.
_NOT_COPIED_META = ("vector_dim", MIGRATION_KEY, *REWRITE_KEYS, KEYWORD_INDEX_KEY)


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[str, ...]
    key: tuple[str, ...]  # the page order: the primary key, or an index that is unique
    serial: str | None = None  # the column a PostgreSQL sequence numbers


# In copy order: a row's parents come before it (sessions, briefs, then turns). The
# exchanges are read by session, then id: the order of the provenance chain.
TABLES: tuple[Table, ...] = (
    Table("meta", ("key", "value"), ("key",)),
    Table("runs", ("seq", "run_id", "graph", "status", "started_at", "duration_ms", "trace"),
          ("seq",)),
    Table("sessions", ("id", "name", "created_at", "last_at", "turns", "chain_head",
                       "trace_id", "cwd"), ("id",), serial="id"),
    Table("briefs", ("id", "session_id", "tier", "created_at", "first_exchange_id",
                     "last_exchange_id", "turns", "body"), ("id",), serial="id"),
    Table("forgotten", ("exchange_id", "session_id", "forgotten_at", "reason", "selector",
                        "content_hash", "chain_hash", "brief_id", "origin"), ("exchange_id",)),
    Table("exchanges", ("id", "session_id", "role", "created_at", "content", "content_hash",
                        "signals", "brief_id", "source_key", "trace_id", "chain_hash"),
          ("session_id", "id"), serial="id"),
    Table("brief_sources", ("brief_id", "exchange_id", "content_hash"),
          ("brief_id", "exchange_id")),
    Table("milestones", ("exchange_id", "session_id", "label", "created_at"),
          ("exchange_id",)),
    Table("provider_vectors", ("model", "exchange_id", "embedding"), ("model", "exchange_id")),
    Table("signal_flags", ("exchange_id", "signature", "span_start", "span_end", "span",
                           "session_id"), ("exchange_id", "signature", "span_start")),
    Table("graph_entities", ("id", "key", "kind", "label", "turns", "community",
                             "centrality"), ("id",), serial="id"),
    Table("graph_aliases", ("entity_id", "surface", "kind", "mentions"),
          ("entity_id", "surface", "kind")),
    Table("graph_entity_turns", ("entity_id", "exchange_id", "session_id"),
          ("entity_id", "exchange_id")),
    Table("graph_edges", ("id", "src", "dst", "kind", "turns"), ("id",), serial="id"),
    Table("graph_edge_turns", ("edge_id", "exchange_id", "session_id"),
          ("edge_id", "exchange_id")),
    Table("graph_cursors", ("session_id", "through_id"), ("session_id",)),
    Table("graph_communities", ("id", "size", "label"), ("id",)),
    Table("cursors", ("kind", "name", "position", "lines", "identity", "head", "session",
                      "captured", "duplicates", "skipped", "resets", "last_success_at",
                      "last_error", "last_error_at", "updated_at"), ("kind", "name")),
    Table("turn_origins", ("origin", "exchange_id", "peer", "received_at"), ("origin",)),
)
_BY_NAME = {t.name: t for t in TABLES}
# What makes a store non-empty: the record, not the traces of the runs that read it.
RECORD_TABLES = ("sessions", "exchanges", "briefs", "forgotten", "milestones", "cursors",
                 "graph_entities", "turn_origins")


# --- building statements (identifiers come from TABLES only) ---------------------------------

def page_sql(table: Table, after: bool) -> str:
    """The next page of ``table`` in key order, after a key (``after``) or from the start."""
    cols, key = ", ".join(table.columns), ", ".join(table.key)
    where = ""
    if after:
        marks = ", ".join("?" * len(table.key))
        # The leading column alone as well: SQLite then seeks the index by it.
        where = f"WHERE ({key}) > ({marks}) AND {table.key[0]} >= ?"
    return f"SELECT {cols} FROM {table.name} {where} ORDER BY {key} LIMIT ?"


# Two tables settle conflicts with the target's own rows: its meta keys are replaced, and
# a run copied again (a resumed copy) stays one run; the run's seq is the target's. Every
# other table goes in with the dialect's ``insert_rows``.
_RUN_COLUMNS = _BY_NAME["runs"].columns[1:]
CONFLICT_INSERTS = {
    "meta": ("INSERT INTO meta(key, value) VALUES (?, ?) "
             "ON CONFLICT(key) DO UPDATE SET value = excluded.value"),
    "runs": (f"INSERT INTO runs({', '.join(_RUN_COLUMNS)}) "
             f"VALUES ({', '.join('?' * len(_RUN_COLUMNS))}) ON CONFLICT(run_id) DO NOTHING"),
}


# --- the progress row -------------------------------------------------------------------------

SELECT_META = "SELECT value FROM meta WHERE key = ?"
INSERT_PROGRESS = "INSERT INTO meta(key, value) VALUES (?, ?)"
UPDATE_PROGRESS = "UPDATE meta SET value = ?3 WHERE key = ?1 AND value = ?2"


def read_progress(conn: Conn) -> str | None:
    """The target's progress row as stored (JSON text), or None: no copy was started."""
    row = first(conn, SELECT_META, (MIGRATION_KEY,))
    return None if row is None else str(row[0])


def claim_target(conn: Conn, progress: dict[str, Any]) -> str:
    """Record the start of a copy into an empty target (call inside a write); a second
    copy started at the same moment fails here on the row's primary key."""
    text = json.dumps(progress, sort_keys=True)
    conn.execute(INSERT_PROGRESS, (MIGRATION_KEY, text))
    return text


def save_progress(conn: Conn, before: str, progress: dict[str, Any]) -> bool:
    """Move the progress row from ``before`` to ``progress``; False when it is no longer
    ``before`` (another copy into the same target moved it)."""
    conn.execute(UPDATE_PROGRESS, (MIGRATION_KEY, before, json.dumps(progress, sort_keys=True)))
    return conn.changes() == 1


def vector_dim(conn: Conn) -> int | None:
    row = first(conn, SELECT_META, ("vector_dim",))
    return None if row is None else int(row[0])


def held_records(conn: Conn) -> dict[str, bool]:
    """For each table of the record: whether it holds a row."""
    sql = " UNION ALL ".join(f"SELECT '{t}', EXISTS(SELECT 1 FROM {t})" for t in RECORD_TABLES)
    return {str(name): bool(found) for name, found in all_rows(conn, sql)}


def table_counts(conn: Conn) -> dict[str, int]:
    """Rows per copied table (the totals a progress bar shows)."""
    sql = " UNION ALL ".join(f"SELECT '{t.name}', count(*) FROM {t.name}" for t in TABLES)
    return {str(name): int(n) for name, n in all_rows(conn, sql)}


# --- keys in the progress row (JSON) ----------------------------------------------------------

def encode_key(values: Sequence[Any]) -> list[Any]:
    return [{"hex": bytes(v).hex()} if isinstance(v, (bytes, memoryview)) else v
            for v in values]


def decode_key(values: Sequence[Any]) -> list[Any]:
    return [bytes.fromhex(v["hex"]) if isinstance(v, dict) else v for v in values]


# --- reading the source -----------------------------------------------------------------------

def _plain(value: Any) -> Any:
    return bytes(value) if isinstance(value, memoryview) else value


def read_page(conn: Conn, table_name: str, after: Sequence[Any] | None,
              limit: int) -> list[Row]:
    """At most ``limit`` rows of the table after the key ``after`` (None: from the start),
    in key order; ``meta`` without the rows that belong to the target."""
    table = _BY_NAME[table_name]
    params: list[Any] = []
    if after is not None:
        key = decode_key(after)
        params = [*key, key[0]]
    rows = [tuple(_plain(v) for v in r)
            for r in all_rows(conn, page_sql(table, after is not None), [*params, limit])]
    return rows


def key_of(table_name: str, row: Row) -> list[Any]:
    """The page key of a row read by ``read_page`` (JSON-ready)."""
    table = _BY_NAME[table_name]
    return encode_key([row[table.columns.index(k)] for k in table.key])


@dataclass(frozen=True)
class TurnEvidence:
    """What checking and indexing a page of turns needs besides the turns themselves."""

    names: dict[int, str]  # session row id -> name (the chain hashes cover the name)
    traces: dict[int, str | None]  # session row id -> its trace id (a turn's, when NULL)
    previous_link: bytes  # the chain hash the page's first turn links to
    previous_contents: list[str]  # the two turns before the page's first, nearest first
    tombstones: list[Row]  # (session, exchange id, chain hash) forgotten in the page's range
    vectors: dict[int, bytes] = field(default_factory=dict)  # int8 components, by turn


SELECT_NAMES = "SELECT id, name, trace_id FROM sessions WHERE {ids}"
SELECT_LAST_LINKS = """
SELECT id, chain_hash FROM (
  SELECT id, chain_hash FROM exchanges WHERE session_id = ?1 AND id < ?2
  ORDER BY id DESC LIMIT 1) AS turn
UNION ALL
SELECT exchange_id, chain_hash FROM (
  SELECT exchange_id, chain_hash FROM forgotten WHERE session_id = ?1 AND exchange_id < ?2
  ORDER BY exchange_id DESC LIMIT 1) AS tombstone"""
SELECT_BEFORE = """
SELECT substr(content, 1, ?3) FROM exchanges WHERE session_id = ?1 AND id < ?2
ORDER BY id DESC LIMIT 2"""
SELECT_TOMBSTONES = """
SELECT session_id, exchange_id, chain_hash FROM forgotten
WHERE (session_id, exchange_id) > (?1, ?2) AND (session_id, exchange_id) <= (?3, ?4)
ORDER BY session_id, exchange_id"""
_NO_KEY = -(2**63)


def _previous_link(conn: Conn, session_id: int, before_id: int) -> bytes:
    """The chain hash that the session's record ``before_id`` links to: that of the
    session's latest turn or tombstone before it (GENESIS: there is none)."""
    links = all_rows(conn, SELECT_LAST_LINKS, (session_id, before_id))
    if not links:
        return GENESIS
    return bytes(max(links, key=lambda r: int(r[0]))[1] or b"")


def turn_evidence(conn: Conn, rows: Sequence[Row], after: Sequence[Any] | None,
                  neighbour_chars: int) -> TurnEvidence:
    """Evidence for a page of ``exchanges`` rows (``TABLES`` column order, in (session,
    id) order) read after the key ``after``, from the same snapshot.

    Every tombstone between ``after`` and the page's last turn comes with the page, so
    the chain is walked over turns and tombstones in order from ``previous_link``; a
    session that starts inside the page starts from GENESIS (its earlier records would
    be in the page too)."""
    sessions = sorted({int(r[1]) for r in rows})
    where, ids = id_list("id", sessions)
    sessions_rows = all_rows(conn, SELECT_NAMES.format(ids=where), ids)
    names = {int(i): str(n) for i, n, _ in sessions_rows}
    traces = {int(i): t for i, _, t in sessions_rows}
    lo = decode_key(after) if after is not None else [_NO_KEY, _NO_KEY]
    last = rows[-1]
    tombstones = [(int(s), int(e), bytes(h)) for s, e, h in all_rows(
        conn, SELECT_TOMBSTONES, (lo[0], lo[1], int(last[1]), int(last[0])))]
    first_turn = (int(rows[0][1]), int(rows[0][0]))
    start = min([first_turn, *((s, e) for s, e, _ in tombstones)])
    link = _previous_link(conn, *start)
    contents = [str(r[0]) for r in all_rows(conn, SELECT_BEFORE,
                                            (*first_turn, neighbour_chars))]
    vectors = dialect(conn).vectors_of(conn, [int(r[0]) for r in rows])
    return TurnEvidence(names=names, traces=traces, previous_link=link, previous_contents=contents,
                        tombstones=tombstones, vectors=vectors)


# --- writing the target -----------------------------------------------------------------------

def write_page(conn: Conn, table_name: str, rows: Sequence[Row]) -> int:
    """Insert a page of rows into the table of the same name (call inside a write)."""
    table = _BY_NAME[table_name]
    if table.name == "meta":
        rows = [r for r in rows if r[0] not in _NOT_COPIED_META]
    elif table.name == "runs":
        rows = [r[1:] for r in rows]
    conflicting = CONFLICT_INSERTS.get(table.name)
    if conflicting is None:
        dialect(conn).insert_rows(conn, table.name, table.columns, rows)
    elif rows:
        conn.executemany(conflicting, list(rows))
    advance_sequence(conn, table)
    return len(rows)


def write_turns(conn: Conn, rows: Sequence[Row], fields: Sequence[tuple[str, str]],
                vectors: dict[int, bytes]) -> int:
    """Insert a page of ``exchanges`` rows with their keyword index entries (``fields``:
    the context and dated words of each, in order) and their vectors."""
    table = _BY_NAME["exchanges"]
    sql_dialect = dialect(conn)
    sql_dialect.insert_rows(conn, table.name, table.columns, rows)
    index_keyword_page(conn, [
        (r[0], int(r[1]), r[4], context, dated)
        for r, (context, dated) in zip(rows, fields, strict=True)])
    sql_dialect.insert_vectors(conn, [(r[0], r[1], vectors[r[0]]) for r in rows
                                      if r[0] in vectors])
    advance_sequence(conn, table)
    return len(rows)


def defer_indexes(conn: Conn) -> list[str]:
    """Drop the indexes the target builds faster after the copy (PostgreSQL: vectors and
    keywords; call in the write that claims the target); returns the statements that
    ``finish_target`` runs to build them again."""
    return dialect(conn).defer_indexes(conn)


def advance_sequence(conn: Conn, table: Table) -> None:
    """The table's ids continue after the copied ones (PostgreSQL's sequences; SQLite
    numbers from the largest id by itself)."""
    if table.serial is not None:
        dialect(conn).advance_sequence(conn, table.name, table.serial)


def finish_target(conn: Conn, deferred: Sequence[str]) -> None:
    """Once every table is copied: the ids of forgotten turns are never given out again,
    and the indexes ``defer_indexes`` dropped are built."""
    dialect(conn).finish_copy(conn, deferred)
