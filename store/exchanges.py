"""Exchanges (turns): the write path of an ingest and the reads of single turns."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from store.provenance import chain_hash, session_head
from store.sql import Conn, Row, all_rows, first, is_postgres, one

__all__ = [
    "Exchange",
    "NewTurn",
    "Recorded",
    "brief_ids",
    "count_live",
    "exchange_from_row",
    "exchanges_by_ids",
    "index_keywords",
    "live_turns",
    "recent_turns",
    "record_turn",
    "session_row_id",
    "turn_trace_sql",
]


@dataclass(frozen=True)
class NewTurn:
    session: str
    role: str
    content: str
    content_hash: bytes
    created_at: float
    vector: bytes
    decisions: tuple[str, ...] = ()
    blockers: tuple[str, ...] = ()
    source_key: str | None = None
    trace_id: str | None = None
    context: str = ""  # keyword index: words of the turns before it (store.search)
    dated: str = ""  # keyword index: its month and year


@dataclass(frozen=True)
class Recorded:
    exchange_id: int
    session_id: int
    duplicate: bool
    live_turns: int


@dataclass(frozen=True)
class Exchange:
    id: int
    session: str
    role: str
    created_at: float
    content: str
    content_hash: bytes
    brief_id: int | None
    trace_id: str | None
    decisions: list[str] = field(default_factory=list)
    blockers: list[str] = field(default_factory=list)


UPSERT_SESSION = """
INSERT INTO sessions(name, created_at, last_at, turns, chain_head) VALUES (?1, ?2, ?2, 1, ?3)
ON CONFLICT(name) DO UPDATE SET last_at = max(sessions.last_at, excluded.last_at),
  turns = sessions.turns + 1,
  chain_head = excluded.chain_head
RETURNING id, trace_id"""
FIND_SOURCE_KEY = "SELECT id, session_id FROM exchanges WHERE source_key = ?"
INSERT_EXCHANGE = """
INSERT INTO exchanges(session_id, role, created_at, content, content_hash, signals,
                      source_key, trace_id, chain_hash)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"""
INSERT_FTS = """
INSERT INTO exchanges_fts(rowid, body, context, dated, scope) VALUES (?, ?, ?, ?, ?)"""
INSERT_VECTOR = (
    "INSERT INTO exchange_vectors(rowid, session_id, embedding) VALUES (?, ?, vec_int8(?))"
)


def _pg_document(content: str, context: str, dated: str) -> str:
    """The weighted tsvector of a turn (store.postgres.schema): its own words A, its
    month and year B, the words it borrows from the turns before it C."""
    return (f"setweight(to_tsvector('english', {content}), 'A') || "
            f"setweight(to_tsvector('english', {dated}), 'B') || "
            f"setweight(to_tsvector('english', {context}), 'C')")


# PostgreSQL: one weighted tsvector and a pgvector halfvec.
INSERT_FTS_PG = f"""
INSERT INTO exchanges_fts(rowid, session_id, doc)
VALUES (?1, ?5, {_pg_document("?2", "?3", "?4")})"""
# A page of keyword index entries in one statement: ?1 rowids, ?2 sessions, ?3 contents,
# ?4 context words, ?5 dated words (arrays in that order).
INSERT_FTS_PG_PAGE = f"""
INSERT INTO exchanges_fts(rowid, session_id, doc)
SELECT r, s, {_pg_document("c", "x", "d")}
FROM unnest(CAST(?1 AS BIGINT[]), CAST(?2 AS BIGINT[]), CAST(?3 AS TEXT[]), CAST(?4 AS TEXT[]),
            CAST(?5 AS TEXT[])) AS page(r, s, c, x, d)"""
INSERT_VECTOR_PG = "INSERT INTO exchange_vectors(rowid, session_id, embedding) VALUES (?, ?, ?)"
COUNT_LIVE = "SELECT count(*) FROM exchanges WHERE session_id = ? AND brief_id IS NULL"
SESSION_ROW_ID = "SELECT id FROM sessions WHERE name = ?"



def turn_trace_sql(turn: str, session: str | None = None) -> str:
    """The SQL value of a turn's trace id, for a row ``turn`` of ``exchanges`` joined to
    its row ``session`` of ``sessions`` (None: not joined, looked up).

    Most turns carry their session's trace id (``sessions.trace_id``, set once and
    kept), so ``exchanges.trace_id`` holds it only when it differs: NULL means the
    session's, '' none (a turn recorded before trace ids, migration 12).
    """
    session_trace = (f"{session}.trace_id" if session is not None else
                     f"(SELECT s.trace_id FROM sessions s WHERE s.id = {turn}.session_id)")
    return f"nullif(coalesce({turn}.trace_id, {session_trace}), '')"


SELECT_EXCHANGE = f"""
SELECT e.id, s.name, e.role, e.created_at, e.content, e.content_hash, e.brief_id,
       {turn_trace_sql("e", "s")}, e.signals
FROM exchanges e JOIN sessions s ON s.id = e.session_id"""
SELECT_LIVE = SELECT_EXCHANGE + """
WHERE e.session_id = ? AND e.brief_id IS NULL ORDER BY e.id LIMIT ?"""
SELECT_RECENT = SELECT_EXCHANGE + """
WHERE e.session_id = ? AND e.brief_id IS NULL ORDER BY e.id DESC LIMIT ?"""


def scope_token(session_id: int) -> str:
    """The FTS token that marks a turn's session (see migration 1)."""
    return f"s{session_id}"


def encode_signals(decisions: Sequence[str], blockers: Sequence[str]) -> str | None:
    if not decisions and not blockers:
        return None
    return json.dumps({"d": list(decisions), "b": list(blockers)}, ensure_ascii=False)


def exchange_from_row(row: Row) -> Exchange:
    """An ``Exchange`` from a row of ``SELECT_EXCHANGE``."""
    signals = json.loads(row[8]) if row[8] else {}
    return Exchange(
        id=row[0],
        session=row[1],
        role=row[2],
        created_at=row[3],
        content=row[4],
        content_hash=row[5],
        brief_id=row[6],
        trace_id=row[7],
        decisions=signals.get("d", []),
        blockers=signals.get("b", []),
    )


def record_turn(conn: Conn, turn: NewTurn) -> Recorded:
    """Store one turn with its keyword and vector index entries. Call inside a write.

    A turn whose ``source_key`` is already stored is not stored again: the existing
    exchange id comes back with ``duplicate=True``. The turn's chain hash links to the
    session's head read here, inside the caller's write transaction.
    """
    if turn.source_key is not None:
        found = first(conn, FIND_SOURCE_KEY, (turn.source_key,))
        if found is not None:
            return Recorded(found[0], found[1], True, count_live(conn, found[1]))
    _, head = session_head(conn, turn.session)
    linked = chain_hash(head, turn.content_hash, turn.session, turn.role, turn.created_at,
                        turn.source_key, turn.trace_id)
    session_id, session_trace = one(conn, UPSERT_SESSION,
                                    (turn.session, turn.created_at, linked))
    stored_trace = None if turn.trace_id is not None and turn.trace_id == session_trace else (
        turn.trace_id or "")  # see turn_trace_sql
    exchange_id: int = one(
        conn,
        INSERT_EXCHANGE,
        (
            session_id,
            turn.role,
            turn.created_at,
            turn.content,
            turn.content_hash,
            encode_signals(turn.decisions, turn.blockers),
            turn.source_key,
            stored_trace,
            linked,
        ),
    )[0]
    index_keywords(conn, exchange_id, session_id, turn.content, turn.context, turn.dated)
    if is_postgres(conn):
        from store.vectors import vector_text  # numpy: not for a process that only reads

        conn.execute(INSERT_VECTOR_PG, (exchange_id, session_id, vector_text(turn.vector)))
    else:
        conn.execute(INSERT_VECTOR, (exchange_id, session_id, turn.vector))
    return Recorded(exchange_id, session_id, False, count_live(conn, session_id))


def index_keywords(conn: Conn, exchange_id: int, session_id: int, content: str,
                   context: str, dated: str) -> None:
    """Add a turn's keyword index entry: its words, the words it borrows from the turns
    before it, its month and year."""
    if is_postgres(conn):
        conn.execute(INSERT_FTS_PG, (exchange_id, content, context, dated, session_id))
    else:
        conn.execute(INSERT_FTS, (exchange_id, content, context, dated,
                                  scope_token(session_id)))


def count_live(conn: Conn, session_id: int) -> int:
    """Uncompressed turns of a session (an index-only count over at most a batch or so)."""
    count: int = one(conn, COUNT_LIVE, (session_id,))[0]
    return count


def session_row_id(conn: Conn, session: str) -> int | None:
    row = first(conn, SESSION_ROW_ID, (session,))
    return None if row is None else int(row[0])


def live_turns(conn: Conn, session_id: int, limit: int) -> list[Exchange]:
    """The oldest ``limit`` uncompressed turns of a session, oldest first."""
    return [exchange_from_row(r) for r in all_rows(conn, SELECT_LIVE, (session_id, limit))]


def recent_turns(conn: Conn, session_id: int, limit: int) -> list[Exchange]:
    """The newest ``limit`` uncompressed turns of a session, oldest first."""
    rows = [exchange_from_row(r) for r in all_rows(conn, SELECT_RECENT, (session_id, limit))]
    rows.reverse()
    return rows


def exchanges_by_ids(conn: Conn, ids: Sequence[int]) -> dict[int, Exchange]:
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    sql = SELECT_EXCHANGE + f" WHERE e.id IN ({marks})"
    return {ex.id: ex for ex in (exchange_from_row(r) for r in all_rows(conn, sql, ids))}


def brief_ids(conn: Conn, ids: Sequence[int]) -> dict[int, int | None]:
    """The brief that holds each of ``ids`` (None: not compressed); unknown ids are absent."""
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows = all_rows(conn, f"SELECT id, brief_id FROM exchanges WHERE id IN ({marks})", ids)
    return {int(r[0]): r[1] for r in rows}
