"""Versioned schema migrations: one ordered list, each migration named once with its
step per dialect, recorded in a table as it is applied.

Each dialect numbers the migrations it runs from 1, in list order, and records each as
``<prefix><version>_<name>``: ``m001_initial``, ``m002_search_fields``, ... on SQLite,
``p001_initial`` on PostgreSQL. PostgreSQL support came with migration 12: its first
step creates at once, in PostgreSQL's types, the tables SQLite's migrations build up
to there (``store.postgres.schema``), so the eleven after the first have no PostgreSQL
step.

On SQLite each migration runs in its own ``BEGIN IMMEDIATE`` transaction and re-checks
the recorded version inside it; on PostgreSQL all of them run in one transaction under
an advisory lock. Either way, several processes opening one new store at once apply
each migration exactly once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, NamedTuple, TypeVar

import apsw

from store.postgres import schema as postgresql
from store.search_filter import FTS_TOKENIZE
from store.sql import Conn

__all__ = [
    "MIGRATIONS",
    "POSTGRESQL_STEPS",
    "RECORDED",
    "SCHEMA_VERSION",
    "SQLITE_STEPS",
    "Migration",
    "Step",
    "migrate",
    "migrate_postgres",
    "pending_migrations",
]

CREATE_MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations(
  version INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  applied_at REAL NOT NULL
)"""
SELECT_APPLIED = "SELECT version FROM schema_migrations"
HAS_MIGRATIONS_TABLE = """
SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"""
RECORD_APPLIED = "INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, ?, ?)"


def initial(conn: apsw.Connection) -> None:
    conn.execute(
        """
        CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
        INSERT INTO meta(key, value) VALUES ('vector_dim', '256');

        CREATE TABLE sessions(
          id INTEGER PRIMARY KEY,
          name TEXT NOT NULL UNIQUE,
          created_at REAL NOT NULL,
          last_at REAL NOT NULL,
          turns INTEGER NOT NULL DEFAULT 0
        );

        CREATE TABLE briefs(
          id INTEGER PRIMARY KEY,
          session_id INTEGER NOT NULL REFERENCES sessions(id),
          tier TEXT NOT NULL CHECK (tier IN ('A', 'B')),
          created_at REAL NOT NULL,
          first_exchange_id INTEGER NOT NULL,
          last_exchange_id INTEGER NOT NULL,
          turns INTEGER NOT NULL,
          body TEXT NOT NULL
        );
        CREATE INDEX briefs_by_session ON briefs(session_id, id);

        CREATE TABLE exchanges(
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          session_id INTEGER NOT NULL REFERENCES sessions(id),
          role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'system', 'tool')),
          created_at REAL NOT NULL,
          content TEXT NOT NULL,
          content_hash BLOB NOT NULL,
          signals TEXT,
          brief_id INTEGER REFERENCES briefs(id),
          source_key TEXT,
          trace_id TEXT
        );
        CREATE INDEX exchanges_by_session ON exchanges(session_id, id);
        CREATE INDEX exchanges_live ON exchanges(session_id, id) WHERE brief_id IS NULL;
        CREATE INDEX exchanges_by_brief ON exchanges(brief_id) WHERE brief_id IS NOT NULL;
        CREATE UNIQUE INDEX exchanges_by_source_key ON exchanges(source_key)
          WHERE source_key IS NOT NULL;

        CREATE TABLE brief_sources(
          brief_id INTEGER NOT NULL REFERENCES briefs(id),
          exchange_id INTEGER NOT NULL,
          content_hash BLOB NOT NULL,
          PRIMARY KEY (brief_id, exchange_id)
        ) WITHOUT ROWID;

        CREATE TABLE milestones(
          exchange_id INTEGER PRIMARY KEY REFERENCES exchanges(id),
          session_id INTEGER NOT NULL REFERENCES sessions(id),
          label TEXT NOT NULL,
          created_at REAL NOT NULL
        );
        CREATE INDEX milestones_by_session ON milestones(session_id, exchange_id);

        CREATE TABLE runs(
          seq INTEGER PRIMARY KEY AUTOINCREMENT,
          run_id TEXT NOT NULL UNIQUE,
          graph TEXT NOT NULL,
          status TEXT NOT NULL,
          started_at REAL NOT NULL,
          duration_ms REAL NOT NULL,
          trace BLOB NOT NULL
        );

        -- Contentless: the text lives once, in exchanges. `scope` holds a session token
        -- so that session-scoped keyword search is one index lookup.
        CREATE VIRTUAL TABLE exchanges_fts USING fts5(
          body, scope, content='', contentless_delete=1,
          tokenize='porter unicode61 remove_diacritics 2'
        );

        CREATE VIRTUAL TABLE exchange_vectors USING vec0(
          session_id integer, embedding int8[256]
        );
        """
    )


# --- search fields and compact hashed vectors -----------------------------------

CREATE_FTS_WITH_FIELDS = f"""
CREATE VIRTUAL TABLE exchanges_fts USING fts5(
  body, context, dated, scope, content='', contentless_delete=1,
  tokenize='{FTS_TOKENIZE}'
)"""
INSERT_FTS_ROW = """
INSERT INTO exchanges_fts(rowid, body, context, dated, scope) VALUES (?, ?, ?, ?, ?)"""
SELECT_TURNS_TO_INDEX = "SELECT id, session_id, created_at, content FROM exchanges ORDER BY id"


def search_fields(conn: apsw.Connection) -> None:
    """The keyword index gains two columns ranked below the turn's own words.

    ``context`` holds the words of the turns just before it in the session (the
    question a turn answers is usually asked in the turn before), ``dated`` the month
    and year it was recorded ("May 2023"), so that "what did we do in March?" matches
    by date. The index is contentless, so it is rebuilt from ``exchanges``; turns
    recorded before this migration are re-indexed with their dates and an empty
    context (context words are extracted at ingest).
    """
    from store.search import dated_terms
    from store.sqlite.search import scope_token

    rows = list(conn.execute(SELECT_TURNS_TO_INDEX))
    conn.execute("DROP TABLE exchanges_fts")
    conn.execute(CREATE_FTS_WITH_FIELDS)
    for exchange_id, session_id, created_at, content in rows:
        conn.execute(INSERT_FTS_ROW, (exchange_id, content, "", dated_terms(created_at),
                                      scope_token(session_id)))


COMPACT_VECTOR_DIM = 128
SELECT_OLD_VECTORS = "SELECT rowid, session_id, embedding FROM exchange_vectors ORDER BY rowid"
CREATE_COMPACT_VECTORS = f"""
CREATE VIRTUAL TABLE exchange_vectors USING vec0(
  session_id integer, embedding int8[{COMPACT_VECTOR_DIM}]
)"""
INSERT_COMPACT_VECTOR = """
INSERT INTO exchange_vectors(rowid, session_id, embedding) VALUES (?, ?, vec_int8(?))"""
SET_VECTOR_DIM = "UPDATE meta SET value = ? WHERE key = 'vector_dim'"


def compact_vectors(conn: apsw.Connection) -> None:
    """Hashed vectors go from 256 to 128 int8 components (the keyword context column
    pays for itself with the bytes saved; recall is unchanged at 128).

    Stored vectors are folded, not recomputed: component ``i`` of the new vector is the
    sum of old components ``i`` and ``i + 128``, which is exactly the hashing of the
    same features into 128 buckets (``h % 256 % 128 == h % 128``), then re-normalised.
    """
    import numpy as np

    rows = list(conn.execute(SELECT_OLD_VECTORS))
    conn.execute("DROP TABLE exchange_vectors")
    conn.execute(CREATE_COMPACT_VECTORS)
    for rowid, session_id, blob in rows:
        old = np.frombuffer(bytes(blob), dtype=np.int8).astype(np.float32)
        if len(old) % COMPACT_VECTOR_DIM:
            continue  # not a layout this migration knows; the turn keeps its keyword entry
        folded = old.reshape(-1, COMPACT_VECTOR_DIM).sum(axis=0)
        norm = float(np.linalg.norm(folded))
        unit = folded / norm if norm else folded
        packed = np.clip(np.rint(unit * 127.0), -127, 127).astype(np.int8).tobytes()
        conn.execute(INSERT_COMPACT_VECTOR, (rowid, session_id, packed))
    conn.execute(SET_VECTOR_DIM, (str(COMPACT_VECTOR_DIM),))


def provider_vectors(conn: apsw.Connection) -> None:
    """Vectors from an optional embedding provider (their dimension is the model's).

    One row per turn and model: int8 components of the unit vector. Rows follow their
    turn when it is deleted. ``meta`` keeps, per model, the id up to which every turn
    was offered to the provider (``provider_through:<model key>``).
    """
    conn.execute(
        """
        CREATE TABLE provider_vectors(
          exchange_id INTEGER NOT NULL REFERENCES exchanges(id) ON DELETE CASCADE,
          model TEXT NOT NULL,
          embedding BLOB NOT NULL,
          PRIMARY KEY (model, exchange_id)
        ) WITHOUT ROWID;
        CREATE INDEX provider_vectors_by_exchange ON provider_vectors(exchange_id);
        """
    )


def provenance_chain(conn: apsw.Connection) -> None:
    """The provenance hash chain (store.provenance) and tombstones of forgotten turns.

    Every turn gains ``chain_hash``, every session ``chain_head`` (its newest turn's
    hash); turns already stored are chained in id order, page by page. ``forgotten``
    keeps, per forgotten turn, its ids, hashes, time and reason (never its content), so
    the chain and the audit stay whole after a deletion. ``brief_sources`` gains an
    index by turn: the audit and forgetting look sources up by turn.
    """
    from store.provenance import backfill_chain

    conn.execute(
        """
        ALTER TABLE exchanges ADD COLUMN chain_hash BLOB;
        ALTER TABLE sessions ADD COLUMN chain_head BLOB;
        CREATE INDEX brief_sources_by_exchange ON brief_sources(exchange_id);
        CREATE TABLE forgotten(
          exchange_id INTEGER PRIMARY KEY,
          session_id INTEGER NOT NULL REFERENCES sessions(id),
          forgotten_at REAL NOT NULL,
          reason TEXT NOT NULL,
          selector TEXT NOT NULL,
          content_hash BLOB NOT NULL,
          chain_hash BLOB NOT NULL,
          brief_id INTEGER
        );
        CREATE INDEX forgotten_by_session ON forgotten(session_id, exchange_id);
        """
    )
    backfill_chain(conn)
def signal_flags(conn: apsw.Connection) -> None:
    """NAFE reasoning-drift flags and per-session trace ids.

    ``signal_flags`` holds one row per flag with the matched span and its offsets in the
    stored text; rows follow their turn when it is deleted (forgetting). ``session_id``
    is kept on the row so the running notes list a session's flags by index.
    ``sessions.trace_id`` is the id a turn gets when its ingest names none (created
    once per session). The trace-id search filter applies to candidate turns by id, so
    ``exchanges.trace_id`` needs no index of its own (one would cost ~35 KB per 1,000 turns).
    """
    conn.execute(
        """
        CREATE TABLE signal_flags(
          exchange_id INTEGER NOT NULL REFERENCES exchanges(id) ON DELETE CASCADE,
          session_id INTEGER NOT NULL REFERENCES sessions(id),
          signature TEXT NOT NULL,
          span_start INTEGER NOT NULL,
          span_end INTEGER NOT NULL,
          span TEXT NOT NULL,
          PRIMARY KEY (exchange_id, signature, span_start)
        ) WITHOUT ROWID;
        CREATE INDEX signal_flags_by_session ON signal_flags(session_id, exchange_id);
        CREATE INDEX signal_flags_by_signature ON signal_flags(signature, exchange_id);
        ALTER TABLE sessions ADD COLUMN trace_id TEXT;
        """
    )


def graphrag(conn: apsw.Connection) -> None:
    """The GraphRAG knowledge graph, derived from the turns by a batch run.

    Entities are keyed by their normalised name; edges by their two ends (``src`` <
    ``dst`` for the undirected co-occurrence kind) and kind. Provenance lives in
    ``graph_entity_turns``/``graph_edge_turns`` with the exchange id as a plain,
    indexed column (no foreign key): forgetting a turn deletes its rows there and
    re-derives the counts (see store.graphrag). ``graph_cursors`` holds, per session,
    the id up to which turns were read; ``graph_communities`` the latest detection.
    """
    conn.execute(
        """
        CREATE TABLE graph_entities(
          id INTEGER PRIMARY KEY,
          key TEXT NOT NULL UNIQUE,
          kind TEXT NOT NULL,
          label TEXT NOT NULL,
          turns INTEGER NOT NULL DEFAULT 0,
          community INTEGER,
          centrality REAL NOT NULL DEFAULT 0
        );
        CREATE INDEX graph_entities_by_community ON graph_entities(community, centrality);
        CREATE TABLE graph_aliases(
          entity_id INTEGER NOT NULL,
          surface TEXT NOT NULL,
          kind TEXT NOT NULL,
          mentions INTEGER NOT NULL,
          PRIMARY KEY (entity_id, surface, kind)
        ) WITHOUT ROWID;
        CREATE TABLE graph_entity_turns(
          entity_id INTEGER NOT NULL,
          exchange_id INTEGER NOT NULL,
          session_id INTEGER NOT NULL,
          PRIMARY KEY (entity_id, exchange_id)
        ) WITHOUT ROWID;
        CREATE INDEX graph_entity_turns_by_exchange ON graph_entity_turns(exchange_id);
        CREATE INDEX graph_entity_turns_by_session
          ON graph_entity_turns(session_id, entity_id, exchange_id);
        CREATE TABLE graph_edges(
          id INTEGER PRIMARY KEY,
          src INTEGER NOT NULL,
          dst INTEGER NOT NULL,
          kind TEXT NOT NULL,
          turns INTEGER NOT NULL DEFAULT 0,
          UNIQUE (src, dst, kind)
        );
        CREATE INDEX graph_edges_by_src_turns ON graph_edges(src, turns);
        CREATE INDEX graph_edges_by_dst_turns ON graph_edges(dst, turns);
        CREATE TABLE graph_edge_turns(
          edge_id INTEGER NOT NULL,
          exchange_id INTEGER NOT NULL,
          session_id INTEGER NOT NULL,
          PRIMARY KEY (edge_id, exchange_id)
        ) WITHOUT ROWID;
        CREATE INDEX graph_edge_turns_by_exchange ON graph_edge_turns(exchange_id);
        CREATE TABLE graph_cursors(
          session_id INTEGER PRIMARY KEY,
          through_id INTEGER NOT NULL
        );
        CREATE TABLE graph_communities(
          id INTEGER PRIMARY KEY,
          size INTEGER NOT NULL,
          label TEXT NOT NULL
        );
        """
    )


# --- automatic capture ------------------------------------------------------------------------


def capture(conn: apsw.Connection) -> None:
    """Cursors: how far each followed stream has been read.

    One row per stream, keyed by ``kind`` (what is followed: ``claude-code`` and
    ``codex`` transcript files; sync can add its peers as kinds of its own) and ``name``
    (the file path). ``position`` is the byte offset of the next unread line;
    ``identity`` (device:inode) and ``head`` (sha256 of the first bytes read, up to
    1 KiB) tell a file that grew from one that was truncated, rewritten or rotated.
    Counts and the last success and error are what capture status reports. Records
    themselves are deduplicated by ``exchanges.source_key``, so a cursor that falls
    behind (a crash between an ingest and the cursor update) only re-reads.
    """
    conn.execute(
        """
        CREATE TABLE cursors(
          kind TEXT NOT NULL,
          name TEXT NOT NULL,
          position INTEGER NOT NULL DEFAULT 0 CHECK (position >= 0),
          lines INTEGER NOT NULL DEFAULT 0,
          identity TEXT,
          head TEXT,
          session TEXT,
          captured INTEGER NOT NULL DEFAULT 0,
          duplicates INTEGER NOT NULL DEFAULT 0,
          skipped INTEGER NOT NULL DEFAULT 0,
          resets INTEGER NOT NULL DEFAULT 0,
          last_success_at REAL,
          last_error TEXT,
          last_error_at REAL,
          updated_at REAL NOT NULL,
          PRIMARY KEY (kind, name)
        ) WITHOUT ROWID;
        CREATE INDEX cursors_by_update ON cursors(updated_at);
        """
    )


# --- sync between stores -------------------------------------------------------------------


def sync(conn: apsw.Connection) -> None:
    """What export/import and push/pull need to recognise a turn they have seen.

    A turn's identity across stores is its *origin*: its chain hash in the store that
    first recorded it. A turn recorded here is its own origin (``exchanges.chain_hash``,
    now indexed by its first 8 bytes: as selective as the whole hash at half the index
    size; ``forgotten.chain_hash`` too, so that a forgotten turn is not brought back by a
    peer). A turn received from a peer is re-linked into the receiving
    session's chain (store.sync explains the rule); when that gives it a chain hash other
    than its origin, ``turn_origins`` keeps the origin. Outbox and inbox positions per
    peer are rows of the ``cursors`` table (kinds ``outbox:sync`` and ``inbox:sync``).
    """
    conn.execute(
        """
        CREATE INDEX exchanges_by_chain ON exchanges(substr(chain_hash, 1, 8));
        CREATE INDEX forgotten_by_chain ON forgotten(chain_hash);
        CREATE TABLE turn_origins(
          origin BLOB PRIMARY KEY,
          exchange_id INTEGER NOT NULL,
          peer TEXT NOT NULL,
          received_at REAL NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX turn_origins_by_exchange ON turn_origins(exchange_id);
        """
    )


# --- forgetting what later features derived (GraphRAG, sync) ---------------------------------


def forget_derived(conn: apsw.Connection) -> None:
    """A tombstone keeps its turn's sync origin (``forgotten.origin``, when the turn was
    re-linked here and its origin differs from its chain hash), so that ``turn_origins``
    holds stored turns only and a forgotten turn's row there goes with it; tombstones'
    rows move now. A graph built before forgetting took back what GraphRAG derived may
    still cite forgotten turns: then it is reset, and the next ``graphrag extract``
    rebuilds it from the remaining turns (bounded: one index probe per tombstone).
    """
    conn.execute(
        """
        ALTER TABLE forgotten ADD COLUMN origin BLOB;
        UPDATE forgotten SET origin = (
          SELECT o.origin FROM turn_origins o WHERE o.exchange_id = forgotten.exchange_id)
        WHERE NOT EXISTS(SELECT 1 FROM exchanges x WHERE x.id = forgotten.exchange_id);
        DELETE FROM turn_origins WHERE exchange_id IN (SELECT exchange_id FROM forgotten)
          AND NOT EXISTS(SELECT 1 FROM exchanges x WHERE x.id = turn_origins.exchange_id);
        CREATE INDEX forgotten_by_origin ON forgotten(origin) WHERE origin IS NOT NULL;
        """
    )
    stale = conn.execute(
        """
        SELECT EXISTS(SELECT 1 FROM forgotten f
          WHERE NOT EXISTS(SELECT 1 FROM exchanges x WHERE x.id = f.exchange_id)
            AND (EXISTS(SELECT 1 FROM graph_entity_turns t WHERE t.exchange_id = f.exchange_id)
              OR EXISTS(SELECT 1 FROM graph_edge_turns t WHERE t.exchange_id = f.exchange_id)))
        """).fetchone()
    if stale is not None and stale[0]:
        conn.execute(
            """
            DELETE FROM graph_entities; DELETE FROM graph_aliases;
            DELETE FROM graph_entity_turns; DELETE FROM graph_edges;
            DELETE FROM graph_edge_turns; DELETE FROM graph_cursors;
            DELETE FROM graph_communities; DELETE FROM meta WHERE key LIKE 'graphrag_%';
            """
        )


def bus_outbox(conn: apsw.Connection) -> None:
    """The store's id for the turns it publishes to the coordination bus:
    random, made once, so that the bus keys of a recreated store (whose
    exchange ids start again at 1) never collide with those of the store before it.
    The bus outbox's cursor is a ``cursors`` row of kind ``outbox:bus`` (migration 8)."""
    conn.execute("INSERT OR IGNORE INTO meta(key, value) "
                 "VALUES ('store_id', lower(hex(randomblob(16))))")


# --- compact storage -----------------------------------------------------------------------------

SELECT_RUN_TRACES = "SELECT seq, trace FROM runs ORDER BY seq"
SET_RUN_TRACE = "UPDATE runs SET trace = ? WHERE seq = ?"


def compact_storage(conn: apsw.Connection) -> None:
    """Fewer bytes per turn, nothing lost.

    Indexes keyed by a session and the table's integer primary key held that key twice
    (an index entry always ends with the rowid): they are keyed by the session alone,
    which orders the same entries the same way. The sync origin index keys turns by
    the first 4 bytes of their chain hash instead of 8 (a probe compares the whole hash;
    4 bytes leave one false candidate per ~4 billion turns). A turn keeps its trace id
    only when it differs from its session's (``store.exchanges.turn_trace_sql``: NULL
    now means the session's, '' none, for the turns recorded before trace ids). Stored
    stage traces are recompressed with the trace dictionary (``store.runs``).
    """
    from store.runs import decode_trace, encode_trace

    conn.execute(
        """
        DROP INDEX exchanges_by_session;
        CREATE INDEX exchanges_by_session ON exchanges(session_id);
        DROP INDEX exchanges_live;
        CREATE INDEX exchanges_live ON exchanges(session_id) WHERE brief_id IS NULL;
        DROP INDEX briefs_by_session;
        CREATE INDEX briefs_by_session ON briefs(session_id);
        DROP INDEX milestones_by_session;
        CREATE INDEX milestones_by_session ON milestones(session_id);
        DROP INDEX forgotten_by_session;
        CREATE INDEX forgotten_by_session ON forgotten(session_id);
        DROP INDEX exchanges_by_chain;
        CREATE INDEX exchanges_by_chain ON exchanges(substr(chain_hash, 1, 4));
        UPDATE exchanges SET trace_id = '' WHERE trace_id IS NULL;
        UPDATE exchanges SET trace_id = NULL
          WHERE trace_id = (SELECT s.trace_id FROM sessions s WHERE s.id = exchanges.session_id);
        """
    )
    for seq, blob in list(conn.execute(SELECT_RUN_TRACES)):
        conn.execute(SET_RUN_TRACE, (encode_trace(decode_trace(blob)), seq))


def traces_without_text(conn: apsw.Connection) -> None:
    """Stage traces stored by earlier versions quoted the values their stages wrote (a
    turn's neighbours' words, queries, replies, error messages): each keeps its run and
    loses those texts (``store.runs.without_text``), so that a forgotten turn survives
    in no trace. The rewritten rows zero the bytes they free (``secure_delete``)."""
    from store.runs import strip_stored_traces

    conn.execute("PRAGMA secure_delete=ON")
    try:
        strip_stored_traces(conn)
    finally:
        conn.execute("PRAGMA secure_delete=FAST")


# --- the project directory of a session (briefings at session start) -------------------------


def session_cwd(conn: apsw.Connection) -> None:
    """A session learns the directory the host worked in (capture reads it from the
    transcript records), so that a new session of the same project can be briefed with
    the notes of the previous ones."""
    conn.execute(
        """
        ALTER TABLE sessions ADD COLUMN cwd TEXT;
        CREATE INDEX sessions_by_cwd ON sessions(cwd, last_at) WHERE cwd IS NOT NULL;
        """
    )


def keyword_queue(conn: apsw.Connection) -> None:
    """The queue of the derived keyword index (``store.keyword_index``): turns stored,
    re-indexed or forgotten since the index last took them in. ``seq`` orders the
    queue and tells a process's copy of it that an entry was replaced."""
    conn.execute(
        """
        CREATE TABLE keyword_pending(
          seq INTEGER PRIMARY KEY AUTOINCREMENT,
          exchange_id INTEGER NOT NULL UNIQUE,
          context TEXT,
          dated TEXT
        );
        """
    )


SqliteStep = Callable[[apsw.Connection], None]
PostgresStep = Callable[[Conn, int], None]  # (connection, dimension of the hashed vectors)


@dataclass(frozen=True)
class Migration:
    """One schema change, named once, and its step on each dialect (None: nothing to
    run there; on PostgreSQL, the second to twelfth are in its initial step)."""

    name: str
    sqlite: SqliteStep | None
    postgresql: PostgresStep | None = None


MIGRATIONS: tuple[Migration, ...] = (
    Migration("initial", initial, postgresql.initial),
    Migration("search_fields", search_fields),
    Migration("compact_vectors", compact_vectors),
    Migration("provider_vectors", provider_vectors),
    Migration("provenance_chain", provenance_chain),
    Migration("signal_flags", signal_flags),
    Migration("graphrag", graphrag),
    Migration("capture", capture),
    Migration("sync", sync),
    Migration("forget_derived", forget_derived),
    Migration("bus_outbox", bus_outbox),
    Migration("compact_storage", compact_storage),
    Migration("traces_without_text", traces_without_text, postgresql.traces_without_text),
    Migration("session_cwd", session_cwd, postgresql.session_cwd),
    Migration("keyword_queue", keyword_queue),
    Migration("scale_tuning", None, postgresql.scale_tuning),
)

T = TypeVar("T")


class Step(NamedTuple, Generic[T]):
    version: int
    name: str  # as recorded in schema_migrations
    run: T


def _numbered(prefix: str, steps: Sequence[tuple[str, T | None]]) -> list[Step[T]]:
    """The steps a dialect has, numbered from 1 and named as it records them."""
    present = [(name, step) for name, step in steps if step is not None]
    return [Step(version, f"{prefix}{version:03d}_{name}", step)
            for version, (name, step) in enumerate(present, start=1)]


SQLITE_STEPS = _numbered("m", [(m.name, m.sqlite) for m in MIGRATIONS])
POSTGRESQL_STEPS = _numbered("p", [(m.name, m.postgresql) for m in MIGRATIONS])
SCHEMA_VERSION = len(SQLITE_STEPS)
# What each dialect (``Backend.dialect``) records once it is current: version -> name.
RECORDED = {"sqlite": {s.version: s.name for s in SQLITE_STEPS},
            "postgresql": {s.version: s.name for s in POSTGRESQL_STEPS}}


def pending_migrations(conn: apsw.Connection) -> int:
    """How many migrations ``migrate`` would apply, read in one snapshot without a lock
    or a write (so a store opened read-only can tell whether it is current)."""
    with conn:  # a read transaction: both statements see the same state
        if conn.execute(HAS_MIGRATIONS_TABLE).fetchone() is None:
            return SCHEMA_VERSION
        applied = {row[0] for row in conn.execute(SELECT_APPLIED)}
    return sum(version not in applied for version, _, _ in SQLITE_STEPS)


def migrate(conn: apsw.Connection) -> int:
    """Apply every SQLite migration not yet recorded; return the schema version.

    A store whose migrations are all recorded is opened without a write transaction:
    every process (a hook's included) opens the store, and a reader must not wait for
    another process's long write to answer."""
    if not pending_migrations(conn):
        return SCHEMA_VERSION
    conn.execute(CREATE_MIGRATIONS_TABLE)
    for version, name, step in SQLITE_STEPS:
        conn.execute("BEGIN IMMEDIATE")
        try:
            applied = {row[0] for row in conn.execute(SELECT_APPLIED)}
            if version not in applied:
                step(conn)
                conn.execute(RECORD_APPLIED, (version, name, time.time()))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    return SCHEMA_VERSION


def migrate_postgres(conn: Conn, vector_dim: int) -> int:
    """Apply the PostgreSQL migrations not yet recorded; returns the schema version.
    ``conn`` is in autocommit mode: the migrations run in one transaction."""
    conn.execute("BEGIN")
    try:
        conn.execute(postgresql.LOCK_MIGRATIONS, (postgresql.MIGRATION_LOCK,))
        conn.execute(postgresql.CREATE_MIGRATIONS_TABLE)
        applied = {int(r[0]) for r in conn.execute(SELECT_APPLIED)}
        for version, name, step in POSTGRESQL_STEPS:
            if version in applied:
                continue
            step(conn, vector_dim)
            conn.execute(RECORD_APPLIED, (version, name, time.time()))
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return len(POSTGRESQL_STEPS)
