"""Exchanges (turns): the write path of an ingest and the reads of single turns."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from store.correlation import turn_trace_sql
from store.dialect import dialect
from store.provenance import GENESIS, chain_hash, session_head
from store.sql import Conn, Row, all_rows, first, one

__all__ = [
    "Exchange",
    "NewTurn",
    "Recorded",
    "TurnIndex",
    "brief_ids",
    "count_live",
    "due_sessions",
    "exchange_from_row",
    "exchanges_by_ids",
    "index_keyword_page",
    "index_keywords",
    "live_turns",
    "recent_turns",
    "record_turn",
    "record_turns",
    "session_row_id",
    "source_key_turn",
    "stored_source_keys",
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
    trace_id: str | None = None  # the turn's trace id (record_turns: as stored)
    chain: bytes | None = None  # the chain hash it was given (record_turns, when stored)


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
INSERT INTO sessions(name, created_at, last_at, turns, chain_head, trace_id)
VALUES (?1, ?2, ?2, 1, ?3, ?4)
ON CONFLICT(name) DO UPDATE SET last_at = max(sessions.last_at, excluded.last_at),
  turns = sessions.turns + 1,
  chain_head = excluded.chain_head,
  trace_id = coalesce(sessions.trace_id, excluded.trace_id)
RETURNING id"""
FIND_SOURCE_KEY = "SELECT id, session_id FROM exchanges WHERE source_key = ?"
INSERT_EXCHANGE = """
INSERT INTO exchanges(session_id, role, created_at, content, content_hash, signals,
                      source_key, trace_id, chain_hash)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"""
COUNT_LIVE = "SELECT count(*) FROM exchanges WHERE session_id = ? AND brief_id IS NULL"
# {ints}: the dialect's table of the session ids bound as ?1.
DUE_SESSIONS = """
SELECT value FROM {ints}
WHERE (SELECT count(*) FROM exchanges WHERE session_id = value AND brief_id IS NULL) >= ?2"""
SESSION_ROW_ID = "SELECT id FROM sessions WHERE name = ?"
SELECT_EXCHANGE = f"""
SELECT e.id, s.name, e.role, e.created_at, e.content, e.content_hash, e.brief_id,
       {turn_trace_sql("e", "s")}, e.signals
FROM exchanges e JOIN sessions s ON s.id = e.session_id"""
SELECT_LIVE = SELECT_EXCHANGE + """
WHERE e.session_id = ? AND e.brief_id IS NULL ORDER BY e.id LIMIT ?"""
SELECT_RECENT = SELECT_EXCHANGE + """
WHERE e.session_id = ? AND e.brief_id IS NULL ORDER BY e.id DESC LIMIT ?"""


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


class TurnIndex:
    """The keyword and vector index entries of the turns a batch writes in one
    transaction (``record_turns``), added with one statement each when the batch is
    written (``add_to``) instead of two statements a turn. Nothing in the batch's
    transaction reads the indexes before that."""

    __slots__ = ("keywords", "vectors")

    def __init__(self) -> None:
        self.keywords: list[tuple[int, int, str, str, str]] = []
        self.vectors: list[tuple[int, int, bytes]] = []

    def add_to(self, conn: Conn) -> None:
        """Write the entries held (call inside the write that stored their turns)."""
        index_keyword_page(conn, self.keywords)
        dialect(conn).insert_vectors(conn, self.vectors)
        self.keywords, self.vectors = [], []


def record_turn(conn: Conn, turn: NewTurn, *, fresh_trace: Callable[[], str] | None = None
                ) -> Recorded:
    """Store one turn with its keyword and vector index entries. Call inside a write.

    A turn whose ``source_key`` is already stored is not stored again: the existing
    exchange id comes back with ``duplicate=True``. The turn's chain hash links to the
    session's head read here, inside the caller's write transaction. (Many turns in
    one write: ``record_turns``.)

    With ``fresh_trace`` (the ingest's trace ids): a turn that names no trace id takes
    its session's, or for a session that has none a new one, ``fresh_trace()`` (called
    only then), and the turn's trace id becomes its session's when the session has none
    (in the statement that updates the session row). Without it, a turn without a trace
    id has none. ``trace_id`` of the result: the turn's.
    """
    if turn.source_key is not None:
        found = first(conn, FIND_SOURCE_KEY, (turn.source_key,))
        if found is not None:
            return Recorded(found[0], found[1], True, count_live(conn, found[1]))
    _, head, session_trace = session_head(conn, turn.session)
    trace = turn.trace_id if fresh_trace is None else (
        turn.trace_id or session_trace or fresh_trace())
    linked = chain_hash(head, turn.content_hash, turn.session, turn.role, turn.created_at,
                        turn.source_key, trace)
    session_id = one(conn, UPSERT_SESSION, (turn.session, turn.created_at, linked,
                                            None if fresh_trace is None else trace))[0]
    # as the session's trace id was before this turn: see turn_trace_sql
    stored_trace = None if trace is not None and trace == session_trace else (trace or "")
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
    dialect(conn).insert_vector(conn, exchange_id, session_id, turn.vector)
    return Recorded(exchange_id, session_id, False, count_live(conn, session_id), trace)


# The batch writer's statements (record_turns).
SELECT_SESSIONS_NAMED = "SELECT name, id, chain_head, trace_id FROM sessions WHERE name IN ({})"
SELECT_KEYS = "SELECT source_key, id, session_id FROM exchanges WHERE source_key IN ({})"
INSERT_SESSION = """
INSERT INTO sessions(name, created_at, last_at, turns) VALUES (?1, ?2, ?2, 0) RETURNING id"""
UPDATE_SESSION = """
UPDATE sessions SET last_at = max(last_at, ?2), turns = turns + ?3, chain_head = ?4,
  trace_id = coalesce(trace_id, ?5)
WHERE id = ?1"""


def _named(conn: Conn, sql: str, values: Sequence[str]) -> list[Row]:
    """``sql`` (a ``{}`` for the list of values) over ``values``, a page at a time."""
    out: list[Row] = []
    for start in range(0, len(values), SOURCE_KEY_PAGE):
        page = values[start:start + SOURCE_KEY_PAGE]
        out.extend(all_rows(conn, sql.format(",".join("?" * len(page))), page))
    return out


class _Session:
    __slots__ = ("head", "id", "last_at", "trace", "turns")

    def __init__(self, row_id: int, head: bytes, trace: str | None) -> None:
        self.id, self.head, self.trace = row_id, head, trace
        self.turns, self.last_at = 0, 0.0


def record_turns(conn: Conn, turns: Sequence[NewTurn],
                 fresh_trace: Callable[[float], str] | None) -> list[Recorded]:
    """Store a batch's turns, in order, inside the caller's write, each as ``record_turn``
    stores it (the same rows, ids, hashes and session counters), with a few statements
    for the whole batch instead of several a turn: the stored source keys and sessions
    are read once, each session row is written once (a new one inserted first), the
    turns go in with one pipelined statement, the index entries with one each.

    With ``fresh_trace`` (an ingest's batch), a turn's ``trace_id`` None takes its
    session's, or for a session that has none yet ``fresh_trace(created_at)`` (called
    only then), which then becomes the session's (as the ingest gives it). Without (an
    import: the sender's trace ids), each turn keeps its own, None meaning none, and no
    session's trace changes, exactly as ``record_turn`` stores it. A turn whose source
    key is stored, or came earlier in the batch, is a duplicate (``live_turns`` is 0 for
    every turn: the batch counts each session's once)."""
    dialect(conn).lock_turn_writers(conn)  # as session_head: chains and ids in order
    keys = [t.source_key for t in turns if t.source_key is not None]
    stored = {str(r[0]): (int(r[1]), int(r[2])) for r in _named(conn, SELECT_KEYS, keys)}
    taken: dict[str, int] = {}  # source key -> position of the batch's turn holding it
    fresh: list[int] = []  # positions of the turns to store
    for at, t in enumerate(turns):
        if t.source_key is None or (t.source_key not in stored and t.source_key not in taken):
            fresh.append(at)
            if t.source_key is not None:
                taken[t.source_key] = at
    names = list(dict.fromkeys(turns[at].session for at in fresh))
    sessions = {str(r[0]): _Session(int(r[1]), bytes(r[2]) if r[2] is not None else GENESIS,
                                    r[3]) for r in _named(conn, SELECT_SESSIONS_NAMED, names)}
    new = [n for n in names if n not in sessions]
    first_at: dict[str, float] = {}
    for at in fresh:
        first_at.setdefault(turns[at].session, turns[at].created_at)
    made = conn.executemany(INSERT_SESSION, [(n, first_at[n]) for n in new])
    for name, row in zip(new, list(made), strict=True):
        sessions[name] = _Session(int(row[0]), GENESIS, None)
    rows = []
    traces: dict[int, str | None] = {}
    chains: dict[int, bytes] = {}
    for at in fresh:
        t, s = turns[at], sessions[turns[at].session]
        if fresh_trace is None:  # as record_turn: the turn's own, none stored as ''
            trace = t.trace_id
            stored_trace = None if trace is not None and trace == s.trace else (trace or "")
        else:
            trace = t.trace_id or s.trace or fresh_trace(t.created_at)
            stored_trace = None if trace == s.trace else trace  # see turn_trace_sql
            if s.trace is None:
                s.trace = trace
        s.head = chain_hash(s.head, t.content_hash, t.session, t.role, t.created_at,
                            t.source_key, trace)
        s.turns += 1
        s.last_at = max(s.last_at, t.created_at) if s.turns > 1 else t.created_at
        traces[at], chains[at] = trace, s.head
        rows.append((s.id, t.role, t.created_at, t.content, t.content_hash,
                     encode_signals(t.decisions, t.blockers), t.source_key, stored_trace,
                     s.head))
    ids = dialect(conn).insert_exchanges(conn, INSERT_EXCHANGE, rows)
    conn.executemany(UPDATE_SESSION, [(s.id, s.last_at, s.turns, s.head, s.trace)
                                      for s in sessions.values() if s.turns])
    index = TurnIndex()
    out: dict[int, Recorded] = {}
    for at, exchange_id in zip(fresh, ids, strict=True):
        t, session_id = turns[at], sessions[turns[at].session].id
        index.keywords.append((exchange_id, session_id, t.content, t.context, t.dated))
        index.vectors.append((exchange_id, session_id, t.vector))
        out[at] = Recorded(exchange_id, session_id, False, 0, traces[at], chains[at])
    index.add_to(conn)
    for at, t in enumerate(turns):
        if at not in out:
            assert t.source_key is not None
            found = stored.get(t.source_key)
            if found is None:
                earlier = out[taken[t.source_key]]
                found = (earlier.exchange_id, earlier.session_id)
            out[at] = Recorded(found[0], found[1], True, 0)
    return [out[at] for at in range(len(turns))]


def index_keywords(conn: Conn, exchange_id: int, session_id: int, content: str,
                   context: str, dated: str) -> None:
    """Add a turn's keyword index entry: its words, the words it borrows from the turns
    before it, its month and year."""
    dialect(conn).index_keywords(conn, exchange_id, session_id, content, context, dated)


def index_keyword_page(conn: Conn, entries: Sequence[tuple[int, int, str, str, str]]) -> None:
    """Add the keyword index entries (exchange id, session id, its words, the words it
    borrows, its month and year) of many turns in one statement."""
    if entries:
        dialect(conn).index_keyword_page(conn, entries)


def source_key_turn(conn: Conn, source_key: str) -> tuple[int, int] | None:
    """(exchange id, session row id) of the turn stored under ``source_key``, or None."""
    found = first(conn, FIND_SOURCE_KEY, (source_key,))
    return None if found is None else (int(found[0]), int(found[1]))


SOURCE_KEY_PAGE = 500  # keys looked up in one statement


def stored_source_keys(conn: Conn, keys: Sequence[str]) -> set[str]:
    """Those of ``keys`` that a stored turn carries."""
    found: set[str] = set()
    for start in range(0, len(keys), SOURCE_KEY_PAGE):
        page = keys[start:start + SOURCE_KEY_PAGE]
        marks = ",".join("?" * len(page))
        found.update(str(r[0]) for r in all_rows(
            conn, f"SELECT source_key FROM exchanges WHERE source_key IN ({marks})", page))
    return found


def count_live(conn: Conn, session_id: int) -> int:
    """Uncompressed turns of a session (an index-only count over at most a batch or so)."""
    count: int = one(conn, COUNT_LIVE, (session_id,))[0]
    return count


def due_sessions(conn: Conn, session_ids: Sequence[int], limit: int) -> list[int]:
    """Those of ``session_ids`` holding ``limit`` uncompressed turns or more, in the
    same order (one statement for them all)."""
    if not session_ids:
        return []
    sql_dialect = dialect(conn)
    rows = all_rows(conn, DUE_SESSIONS.replace("{ints}", sql_dialect.int_table),
                    (sql_dialect.int_array(list(session_ids)), limit))
    due = {int(r[0]) for r in rows}
    return [s for s in session_ids if s in due]


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
