"""Versioned schema migrations: one ordered list, each migration declared once and
rendered for each dialect, recorded in a table as it is applied.

A migration is a list of dialect-neutral operations (``store.schema``): tables,
indexes and columns, the keyword index and the hashed vectors, and the functions that
carry a store's rows into the new shape. ``store.sqlite.schema`` and
``store.postgres.schema`` render them.

Each dialect numbers the migrations it runs from 1, in list order, and records each as
``<prefix><version>_<name>``: ``m001_initial``, ``m002_search_fields``, ... on SQLite,
``p001_initial`` on PostgreSQL. PostgreSQL support came after ``compact_storage``
(SQLite's twelfth): its first step creates at once the schema that those twelve
leave (``store.schema.final_schema``); each later migration is a step of both, except
the queue of SQLite's derived keyword index. A schema change is one more ``Migration``
at the end of ``MIGRATIONS``: both dialects run it, number it and record it.

On SQLite each migration runs in its own ``BEGIN IMMEDIATE`` transaction and re-checks
the recorded version inside it, and a new file is given the schema all of them leave in
one such transaction, each recorded (``final_schema``, as PostgreSQL's first step); on
PostgreSQL all of them run in one transaction under an advisory lock. Either way,
several processes opening one new store at once apply each migration exactly once.

A store that records every migration is opened without this module
(``store.schema_version``): it is imported only to migrate or create a file.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, NamedTuple, TypeVar

import apsw

from store.postgres import schema as postgresql
from store.schema import (
    AddColumn,
    Data,
    DropIndex,
    DropTable,
    Index,
    KeywordTable,
    NewStoreId,
    Operation,
    Table,
    VectorTable,
    column,
    final_schema,
)
from store.schema_version import (
    CREATE_MIGRATIONS_TABLE,
    SCHEMA_VERSION,
    SELECT_APPLIED,
    pending_migrations,
)
from store.search_filter import KEYWORD_FIELDS
from store.sql import Conn
from store.sqlite import schema as sqlite

__all__ = [
    "MIGRATIONS",
    "PENDING_LIST_KB",
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

RECORD_APPLIED = "INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, ?, ?)"
# Anything in a file besides the migrations' own table: a store, or someone else's file.
HAS_OTHER_OBJECTS = "SELECT 1 FROM sqlite_master WHERE name != 'schema_migrations' LIMIT 1"

ROLES = "role IN ('user', 'assistant', 'system', 'tool')"

INITIAL: tuple[Operation, ...] = (
    Table("meta", (column("key TEXT", key=True), column("value TEXT NOT NULL")),
          clustered=True),
    Table("sessions", (
        column("id INT", key=True, generated="reused"),
        column("name TEXT NOT NULL", unique=True),
        column("created_at REAL NOT NULL"),
        column("last_at REAL NOT NULL"),
        column("turns INT NOT NULL", default="0"))),
    Table("briefs", (
        column("id INT", key=True, generated="reused"),
        column("session_id INT NOT NULL", references="sessions(id)"),
        column("tier TEXT NOT NULL", check="tier IN ('A', 'B')"),
        column("created_at REAL NOT NULL"),
        column("first_exchange_id INT NOT NULL"),
        column("last_exchange_id INT NOT NULL"),
        column("turns INT NOT NULL"),
        column("body TEXT NOT NULL"))),
    Index("briefs_by_session", "briefs", ("session_id", "id")),
    Table("exchanges", (
        column("id INT", key=True, generated="never_reused"),
        column("session_id INT NOT NULL", references="sessions(id)"),
        column("role TEXT NOT NULL", check=ROLES),
        column("created_at REAL NOT NULL"),
        column("content TEXT NOT NULL"),
        column("content_hash BYTES NOT NULL"),
        column("signals TEXT"),
        column("brief_id INT", references="briefs(id)"),
        column("source_key TEXT"),
        column("trace_id TEXT"))),
    Index("exchanges_by_session", "exchanges", ("session_id", "id")),
    Index("exchanges_live", "exchanges", ("session_id", "id"), where="brief_id IS NULL"),
    Index("exchanges_by_brief", "exchanges", ("brief_id",), where="brief_id IS NOT NULL"),
    Index("exchanges_by_source_key", "exchanges", ("source_key",),
          where="source_key IS NOT NULL", unique=True),
    Table("brief_sources", (
        column("brief_id INT NOT NULL", references="briefs(id)"),
        column("exchange_id INT NOT NULL"),
        column("content_hash BYTES NOT NULL")),
        primary_key=("brief_id", "exchange_id"), clustered=True),
    Table("milestones", (
        column("exchange_id INT", key=True, references="exchanges(id)"),
        column("session_id INT NOT NULL", references="sessions(id)"),
        column("label TEXT NOT NULL"),
        column("created_at REAL NOT NULL"))),
    Index("milestones_by_session", "milestones", ("session_id", "exchange_id")),
    Table("runs", (
        column("seq INT", key=True, generated="never_reused"),
        column("run_id TEXT NOT NULL", unique=True),
        column("graph TEXT NOT NULL"),
        column("status TEXT NOT NULL"),
        column("started_at REAL NOT NULL"),
        column("duration_ms REAL NOT NULL"),
        column("trace BYTES NOT NULL"))),
    # `scope` holds a session token, so that session-scoped keyword search is one
    # index lookup.
    KeywordTable("exchanges_fts", ("body", "scope"), "porter unicode61 remove_diacritics 2"),
    VectorTable("exchange_vectors", 256),
)


# --- search fields and compact hashed vectors -----------------------------------

CREATE_FTS_WITH_FIELDS = sqlite.fts5_table(KEYWORD_FIELDS)
INSERT_FTS_ROW = """
INSERT INTO exchanges_fts(rowid, body, context, dated, scope) VALUES (?, ?, ?, ?, ?)"""
SELECT_TURNS_TO_INDEX = "SELECT id, session_id, created_at, content FROM exchanges ORDER BY id"


def reindex_with_dates(conn: Conn) -> None:
    """Turns recorded before the keyword index had its fields are indexed again with
    their dates and an empty context (context words are extracted at ingest)."""
    from store.search_filter import dated_terms
    from store.sqlite.search import scope_token

    for exchange_id, session_id, created_at, content in list(
            conn.execute(SELECT_TURNS_TO_INDEX)):
        conn.execute(INSERT_FTS_ROW, (exchange_id, content, "", dated_terms(created_at),
                                      scope_token(session_id)))


# The keyword index gains two columns ranked below the turn's own words. ``context``
# holds the words of the turns just before it in the session (the question a turn
# answers is usually asked in the turn before), ``dated`` the month and year it was
# recorded ("May 2023"), so that "what did we do in March?" matches by date.
SEARCH_FIELDS = (DropTable("exchanges_fts"), KEYWORD_FIELDS, Data(reindex_with_dates))

COMPACT_VECTOR_DIM = 128
KEEP_OLD_VECTORS = """
CREATE TEMP TABLE old_vectors AS SELECT rowid, session_id, embedding FROM exchange_vectors"""
SELECT_OLD_VECTORS = "SELECT rowid, session_id, embedding FROM temp.old_vectors ORDER BY rowid"
DROP_OLD_VECTORS = "DROP TABLE temp.old_vectors"
INSERT_COMPACT_VECTOR = """
INSERT INTO exchange_vectors(rowid, session_id, embedding) VALUES (?, ?, vec_int8(?))"""


def keep_old_vectors(conn: Conn) -> None:
    conn.execute(KEEP_OLD_VECTORS)


def fold_old_vectors(conn: Conn) -> None:
    """Stored vectors are folded, not recomputed: component ``i`` of the new vector is
    the sum of old components ``i`` and ``i + 128``, which is exactly the hashing of the
    same features into 128 buckets (``h % 256 % 128 == h % 128``), then re-normalised."""
    import numpy as np

    for rowid, session_id, blob in list(conn.execute(SELECT_OLD_VECTORS)):
        old = np.frombuffer(bytes(blob), dtype=np.int8).astype(np.float32)
        if len(old) % COMPACT_VECTOR_DIM:
            continue  # not a layout this migration knows; the turn keeps its keyword entry
        folded = old.reshape(-1, COMPACT_VECTOR_DIM).sum(axis=0)
        norm = float(np.linalg.norm(folded))
        unit = folded / norm if norm else folded
        packed = np.clip(np.rint(unit * 127.0), -127, 127).astype(np.int8).tobytes()
        conn.execute(INSERT_COMPACT_VECTOR, (rowid, session_id, packed))
    conn.execute(DROP_OLD_VECTORS)


# Hashed vectors go from 256 to 128 int8 components (the keyword context column pays
# for itself with the bytes saved; recall is unchanged at 128).
COMPACT_VECTORS = (Data(keep_old_vectors), DropTable("exchange_vectors"),
                   VectorTable("exchange_vectors", COMPACT_VECTOR_DIM), Data(fold_old_vectors))

# Vectors from an optional embedding provider (their dimension is the model's): one row
# per turn and model, int8 components of the unit vector. Rows follow their turn when
# it is deleted. ``meta`` keeps, per model, the id up to which every turn was offered to
# the provider (``provider_through:<model key>``).
PROVIDER_VECTORS = (
    Table("provider_vectors", (
        column("exchange_id INT NOT NULL", references="exchanges(id)", on_delete_cascade=True),
        column("model TEXT NOT NULL"),
        column("embedding BYTES NOT NULL")),
        primary_key=("model", "exchange_id"), clustered=True),
    Index("provider_vectors_by_exchange", "provider_vectors", ("exchange_id",)),
)


def backfill_chain(conn: Conn) -> None:
    from store.provenance import backfill_chain

    backfill_chain(conn)


# The provenance hash chain (store.provenance) and tombstones of forgotten turns. Every
# turn gains ``chain_hash``, every session ``chain_head`` (its newest turn's hash); turns
# already stored are chained in id order, page by page. ``forgotten`` keeps, per
# forgotten turn, its ids, hashes, time and reason (never its content), so the chain and
# the audit stay whole after a deletion. ``brief_sources`` gains an index by turn: the
# audit and forgetting look sources up by turn.
PROVENANCE_CHAIN = (
    AddColumn("exchanges", column("chain_hash BYTES")),
    AddColumn("sessions", column("chain_head BYTES")),
    Index("brief_sources_by_exchange", "brief_sources", ("exchange_id",)),
    Table("forgotten", (
        column("exchange_id INT", key=True),
        column("session_id INT NOT NULL", references="sessions(id)"),
        column("forgotten_at REAL NOT NULL"),
        column("reason TEXT NOT NULL"),
        column("selector TEXT NOT NULL"),
        column("content_hash BYTES NOT NULL"),
        column("chain_hash BYTES NOT NULL"),
        column("brief_id INT"))),
    Index("forgotten_by_session", "forgotten", ("session_id", "exchange_id")),
    Data(backfill_chain),
)

# NAFE reasoning-drift flags and per-session trace ids. ``signal_flags`` holds one row
# per flag with the matched span and its offsets in the stored text; rows follow their
# turn when it is deleted (forgetting). ``session_id`` is kept on the row so the running
# notes list a session's flags by index. ``sessions.trace_id`` is the id a turn gets
# when its ingest names none (created once per session). The trace-id search filter
# applies to candidate turns by id, so ``exchanges.trace_id`` needs no index of its own
# (one would cost ~35 KB per 1,000 turns).
SIGNAL_FLAGS = (
    Table("signal_flags", (
        column("exchange_id INT NOT NULL", references="exchanges(id)", on_delete_cascade=True),
        column("session_id INT NOT NULL", references="sessions(id)"),
        column("signature TEXT NOT NULL"),
        column("span_start INT NOT NULL"),
        column("span_end INT NOT NULL"),
        column("span TEXT NOT NULL")),
        primary_key=("exchange_id", "signature", "span_start"), clustered=True),
    Index("signal_flags_by_session", "signal_flags", ("session_id", "exchange_id")),
    Index("signal_flags_by_signature", "signal_flags", ("signature", "exchange_id")),
    AddColumn("sessions", column("trace_id TEXT")),
)


def _provenance(name: str, owner: str) -> Table:
    """A GraphRAG provenance table: which turns (of which session) an entity or an
    edge was read from."""
    return Table(name, (column(f"{owner} INT NOT NULL"), column("exchange_id INT NOT NULL"),
                        column("session_id INT NOT NULL")),
                 primary_key=(owner, "exchange_id"), clustered=True)


# The GraphRAG knowledge graph, derived from the turns by a batch run. Entities are
# keyed by their normalised name; edges by their two ends (``src`` < ``dst`` for the
# undirected co-occurrence kind) and kind. Provenance lives in
# ``graph_entity_turns``/``graph_edge_turns`` with the exchange id as a plain, indexed
# column (no foreign key): forgetting a turn deletes its rows there and re-derives the
# counts (see store.graphrag). ``graph_cursors`` holds, per session, the id up to which
# turns were read; ``graph_communities`` the latest detection.
GRAPHRAG = (
    Table("graph_entities", (
        column("id INT", key=True, generated="reused"),
        column("key TEXT NOT NULL", unique=True),
        column("kind TEXT NOT NULL"),
        column("label TEXT NOT NULL"),
        column("turns INT NOT NULL", default="0"),
        column("community INT"),
        column("centrality REAL NOT NULL", default="0"))),
    Index("graph_entities_by_community", "graph_entities", ("community", "centrality")),
    Table("graph_aliases", (
        column("entity_id INT NOT NULL"),
        column("surface TEXT NOT NULL"),
        column("kind TEXT NOT NULL"),
        column("mentions INT NOT NULL")),
        primary_key=("entity_id", "surface", "kind"), clustered=True),
    _provenance("graph_entity_turns", "entity_id"),
    Index("graph_entity_turns_by_exchange", "graph_entity_turns", ("exchange_id",)),
    Index("graph_entity_turns_by_session", "graph_entity_turns",
          ("session_id", "entity_id", "exchange_id")),
    Table("graph_edges", (
        column("id INT", key=True, generated="reused"),
        column("src INT NOT NULL"),
        column("dst INT NOT NULL"),
        column("kind TEXT NOT NULL"),
        column("turns INT NOT NULL", default="0")),
        unique=(("src", "dst", "kind"),)),
    Index("graph_edges_by_src_turns", "graph_edges", ("src", "turns")),
    Index("graph_edges_by_dst_turns", "graph_edges", ("dst", "turns")),
    _provenance("graph_edge_turns", "edge_id"),
    Index("graph_edge_turns_by_exchange", "graph_edge_turns", ("exchange_id",)),
    Table("graph_cursors", (column("session_id INT", key=True),
                            column("through_id INT NOT NULL"))),
    Table("graph_communities", (column("id INT", key=True), column("size INT NOT NULL"),
                                column("label TEXT NOT NULL"))),
)

# Cursors: how far each followed stream has been read. One row per stream, keyed by
# ``kind`` (what is followed: ``claude-code`` and ``codex`` transcript files; sync can
# add its peers as kinds of its own) and ``name`` (the file path). ``position`` is the
# byte offset of the next unread line; ``identity`` (device:inode) and ``head`` (sha256
# of the first bytes read, up to 1 KiB) tell a file that grew from one that was
# truncated, rewritten or rotated. Counts and the last success and error are what
# capture status reports. Records themselves are deduplicated by
# ``exchanges.source_key``, so a cursor that falls behind (a crash between an ingest and
# the cursor update) only re-reads.
CAPTURE = (
    Table("cursors", (
        column("kind TEXT NOT NULL"),
        column("name TEXT NOT NULL"),
        column("position INT NOT NULL", default="0", check="position >= 0"),
        column("lines INT NOT NULL", default="0"),
        column("identity TEXT"),
        column("head TEXT"),
        column("session TEXT"),
        column("captured INT NOT NULL", default="0"),
        column("duplicates INT NOT NULL", default="0"),
        column("skipped INT NOT NULL", default="0"),
        column("resets INT NOT NULL", default="0"),
        column("last_success_at REAL"),
        column("last_error TEXT"),
        column("last_error_at REAL"),
        column("updated_at REAL NOT NULL")),
        primary_key=("kind", "name"), clustered=True),
    Index("cursors_by_update", "cursors", ("updated_at",)),
)

# What export/import and push/pull need to recognise a turn they have seen. A turn's
# identity across stores is its *origin*: its chain hash in the store that first
# recorded it. A turn recorded here is its own origin (``exchanges.chain_hash``, now
# indexed by its first 8 bytes: as selective as the whole hash at half the index size;
# ``forgotten.chain_hash`` too, so that a forgotten turn is not brought back by a peer).
# A turn received from a peer is re-linked into the receiving session's chain
# (store.sync explains the rule); when that gives it a chain hash other than its
# origin, ``turn_origins`` keeps the origin. Outbox and inbox positions per peer are
# rows of the ``cursors`` table (kinds ``outbox:sync`` and ``inbox:sync``).
SYNC = (
    Index("exchanges_by_chain", "exchanges", ("substr(chain_hash, 1, 8)",)),
    Index("forgotten_by_chain", "forgotten", ("chain_hash",)),
    Table("turn_origins", (
        column("origin BYTES", key=True),
        column("exchange_id INT NOT NULL"),
        column("peer TEXT NOT NULL"),
        column("received_at REAL NOT NULL")), clustered=True),
    Index("turn_origins_by_exchange", "turn_origins", ("exchange_id",)),
)


# --- forgetting what later features derived (GraphRAG, sync) ---------------------------------

MOVE_ORIGINS = """
UPDATE forgotten SET origin = (
  SELECT o.origin FROM turn_origins o WHERE o.exchange_id = forgotten.exchange_id)
WHERE NOT EXISTS(SELECT 1 FROM exchanges x WHERE x.id = forgotten.exchange_id);
DELETE FROM turn_origins WHERE exchange_id IN (SELECT exchange_id FROM forgotten)
  AND NOT EXISTS(SELECT 1 FROM exchanges x WHERE x.id = turn_origins.exchange_id)"""
GRAPH_CITES_FORGOTTEN = """
SELECT EXISTS(SELECT 1 FROM forgotten f
  WHERE NOT EXISTS(SELECT 1 FROM exchanges x WHERE x.id = f.exchange_id)
    AND (EXISTS(SELECT 1 FROM graph_entity_turns t WHERE t.exchange_id = f.exchange_id)
      OR EXISTS(SELECT 1 FROM graph_edge_turns t WHERE t.exchange_id = f.exchange_id)))"""
RESET_GRAPH = """
DELETE FROM graph_entities; DELETE FROM graph_aliases;
DELETE FROM graph_entity_turns; DELETE FROM graph_edges;
DELETE FROM graph_edge_turns; DELETE FROM graph_cursors;
DELETE FROM graph_communities; DELETE FROM meta WHERE key LIKE 'graphrag_%'"""


def move_origins(conn: Conn) -> None:
    conn.execute(MOVE_ORIGINS)


def reset_stale_graph(conn: Conn) -> None:
    stale = conn.execute(GRAPH_CITES_FORGOTTEN).fetchone()
    if stale is not None and stale[0]:
        conn.execute(RESET_GRAPH)


# A tombstone keeps its turn's sync origin (``forgotten.origin``, when the turn was
# re-linked here and its origin differs from its chain hash), so that ``turn_origins``
# holds stored turns only and a forgotten turn's row there goes with it; tombstones'
# rows move now. A graph built before forgetting took back what GraphRAG derived may
# still cite forgotten turns: then it is reset, and the next ``graphrag extract``
# rebuilds it from the remaining turns (bounded: one index probe per tombstone).
FORGET_DERIVED = (
    AddColumn("forgotten", column("origin BYTES")),
    Data(move_origins),
    Index("forgotten_by_origin", "forgotten", ("origin",), where="origin IS NOT NULL"),
    Data(reset_stale_graph),
)

# The store's id for the turns it publishes to the coordination bus: random, made once,
# so that the bus keys of a recreated store (whose exchange ids start again at 1) never
# collide with those of the store before it. The bus outbox's cursor is a ``cursors``
# row of kind ``outbox:bus`` (migration 8).
BUS_OUTBOX = (NewStoreId(),)


# --- compact storage -----------------------------------------------------------------------------

KEEP_DIFFERENT_TRACE_IDS = """
UPDATE exchanges SET trace_id = '' WHERE trace_id IS NULL;
UPDATE exchanges SET trace_id = NULL
  WHERE trace_id = (SELECT s.trace_id FROM sessions s WHERE s.id = exchanges.session_id)"""
SELECT_RUN_TRACES = "SELECT seq, trace FROM runs ORDER BY seq"
SET_RUN_TRACE = "UPDATE runs SET trace = ? WHERE seq = ?"


def compact_rows(conn: Conn) -> None:
    from store.runs import decode_trace, encode_trace

    conn.execute(KEEP_DIFFERENT_TRACE_IDS)
    for seq, blob in list(conn.execute(SELECT_RUN_TRACES)):
        conn.execute(SET_RUN_TRACE, (encode_trace(decode_trace(blob)), seq))


def _by_session(name: str, table: str, id_column: str, where: str | None = None
                ) -> tuple[DropIndex, Index]:
    return DropIndex(name), Index(name, table, ("session_id",), where=where, then_id=id_column)


# Fewer bytes per turn, nothing lost. Indexes keyed by a session and the table's integer
# primary key held that key twice on SQLite (an index entry always ends with the rowid):
# they are keyed by the session alone, which orders the same entries the same way. The
# sync origin index keys turns by the first 4 bytes of their chain hash instead of 8 (a
# probe compares the whole hash; 4 bytes leave one false candidate per ~4 billion
# turns). A turn keeps its trace id only when it differs from its session's
# (``store.exchanges.turn_trace_sql``: NULL now means the session's, '' none, for the
# turns recorded before trace ids). Stored stage traces are recompressed with the trace
# dictionary (``store.runs``).
COMPACT_STORAGE = (
    *_by_session("exchanges_by_session", "exchanges", "id"),
    *_by_session("exchanges_live", "exchanges", "id", where="brief_id IS NULL"),
    *_by_session("briefs_by_session", "briefs", "id"),
    *_by_session("milestones_by_session", "milestones", "exchange_id"),
    *_by_session("forgotten_by_session", "forgotten", "exchange_id"),
    DropIndex("exchanges_by_chain"),
    Index("exchanges_by_chain", "exchanges", ("substr(chain_hash, 1, 4)",)),
    Data(compact_rows),
)


def strip_traces(conn: Conn) -> None:
    from store.runs import strip_stored_traces

    strip_stored_traces(conn)


# Stage traces stored by earlier versions quoted the values their stages wrote (a turn's
# neighbours' words, queries, replies, error messages): each keeps its run and loses
# those texts (``store.runs.without_text``), so that a forgotten turn survives in no
# trace. On SQLite the rewritten rows zero the bytes they free (``secure_delete``);
# PostgreSQL reclaims the old row versions at its next vacuum.
TRACES_WITHOUT_TEXT = (Data(strip_traces, erases=True),)

# A session learns the directory the host worked in (capture reads it from the
# transcript records), so that a new session of the same project can be briefed with
# the notes of the previous ones.
SESSION_CWD = (
    AddColumn("sessions", column("cwd TEXT")),
    Index("sessions_by_cwd", "sessions", ("cwd", "last_at"), where="cwd IS NOT NULL"),
)

# The queue of the derived keyword index (``store.keyword_index``, SQLite's): turns
# stored, re-indexed or forgotten since the index last took them in. ``seq`` orders the
# queue and tells a process's copy of it that an entry was replaced.
KEYWORD_QUEUE = (
    Table("keyword_pending", (
        column("seq INT", key=True, generated="never_reused"),
        column("exchange_id INT NOT NULL", unique=True),
        column("context TEXT"),
        column("dated TEXT"))),
)


def add_keyword_epoch(conn: Conn) -> None:
    conn.execute(sqlite.keyword_epoch("exchanges_fts"))


# The keyword index's epoch (``store.sqlite.schema.keyword_epoch``): a store created
# since has it with its keyword table; an older one gains it here.
KEYWORD_EPOCH = (Data(add_keyword_epoch),)

# PostgreSQL's tuning for many writers and large stores. The hashed vectors lose their
# HNSW index: each process searches its in-memory copy (store.postgres.vectors), and an
# insert into the graph cost more than the rest of a turn's ingest. A session's row is
# rewritten by every ingest (its chain head, counters and last turn's time): with room
# left on its page (fillfactor) and no index on a column the ingest changes, the new
# version is a heap-only tuple on the same page, pruned without VACUUM, instead of a new
# entry in every index of the table. A directory's sessions are few; they are sorted by
# recency when read. (SQLite rewrites the row in place: it keeps its index.)
SCALE_TUNING = (
    DropIndex("exchange_vectors_hnsw"),
    Data(lambda conn: conn.execute("ALTER TABLE sessions SET (fillfactor = 50)")),
    DropIndex("sessions_by_cwd"),
    Index("sessions_by_cwd", "sessions", ("cwd",), where="cwd IS NOT NULL"),
)

# PostgreSQL's keyword index takes new turns into a pending list that every search reads
# whole, until the list is merged into the index: by VACUUM, or by the insert that
# finds it full. The server's default (4 MB) is sized for write throughput: after a
# bulk write a session search took 26-28 ms instead of 7 (20,000 turns) until
# autovacuum ran. 256 kB keeps that read small and the merges frequent, at the same
# bulk write speed; ``fastupdate = off`` (no list) made the bulk write 1.6 times slower.
PENDING_LIST_KB = 256
SHORT_PENDING_LIST = (
    Data(lambda conn: conn.execute(
        f"ALTER INDEX exchanges_fts_doc SET (gin_pending_list_limit = {PENDING_LIST_KB})")),
    Data(lambda conn: conn.execute("SELECT gin_clean_pending_list('exchanges_fts_doc')")),
)


@dataclass(frozen=True)
class Migration:
    """One schema change, declared once. ``sqlite_only``: PostgreSQL has nothing of it
    (the derived keyword index is SQLite's); ``postgresql_only``: SQLite has nothing of
    it (a PostgreSQL storage setting)."""

    name: str
    operations: tuple[Operation, ...]
    sqlite_only: bool = False
    postgresql_only: bool = False


MIGRATIONS: tuple[Migration, ...] = (
    Migration("initial", INITIAL),
    Migration("search_fields", SEARCH_FIELDS),
    Migration("compact_vectors", COMPACT_VECTORS),
    Migration("provider_vectors", PROVIDER_VECTORS),
    Migration("provenance_chain", PROVENANCE_CHAIN),
    Migration("signal_flags", SIGNAL_FLAGS),
    Migration("graphrag", GRAPHRAG),
    Migration("capture", CAPTURE),
    Migration("sync", SYNC),
    Migration("forget_derived", FORGET_DERIVED),
    Migration("bus_outbox", BUS_OUTBOX),
    Migration("compact_storage", COMPACT_STORAGE),
    Migration("traces_without_text", TRACES_WITHOUT_TEXT),
    Migration("session_cwd", SESSION_CWD),
    Migration("keyword_queue", KEYWORD_QUEUE, sqlite_only=True),
    Migration("scale_tuning", SCALE_TUNING, postgresql_only=True),
    Migration("keyword_epoch", KEYWORD_EPOCH, sqlite_only=True),
    Migration("short_pending_list", SHORT_PENDING_LIST, postgresql_only=True),
)
# PostgreSQL's first step creates what the migrations before this one leave.
POSTGRESQL_SINCE = "traces_without_text"

T = TypeVar("T")


class Step(NamedTuple, Generic[T]):
    version: int
    name: str  # as recorded in schema_migrations
    run: T


SqliteStep = Callable[[apsw.Connection], None]
PostgresStep = Callable[[Conn, int], None]  # (connection, dimension of the hashed vectors)


def _numbered(prefix: str, steps: Sequence[tuple[str, T]]) -> list[Step[T]]:
    """A dialect's steps, numbered from 1 and named as it records them."""
    return [Step(version, f"{prefix}{version:03d}_{name}", step)
            for version, (name, step) in enumerate(steps, start=1)]


def _postgresql_steps() -> list[tuple[str, PostgresStep]]:
    since = next(i for i, m in enumerate(MIGRATIONS) if m.name == POSTGRESQL_SINCE)
    earlier = [op for m in MIGRATIONS[:since] for op in m.operations]
    return [("initial", postgresql.initial(earlier)),
            *((m.name, postgresql.step(m.operations)) for m in MIGRATIONS[since:]
              if not m.sqlite_only)]


SQLITE_STEPS = _numbered("m", [(m.name, sqlite.step(m.operations)) for m in MIGRATIONS
                               if not m.postgresql_only])
POSTGRESQL_STEPS = _numbered("p", _postgresql_steps())
if len(SQLITE_STEPS) != SCHEMA_VERSION:  # kept beside the list: see store.schema_version
    raise RuntimeError(f"store.schema_version.SCHEMA_VERSION is {SCHEMA_VERSION}, but there "
                       f"are {len(SQLITE_STEPS)} SQLite migrations: set it to {len(SQLITE_STEPS)}")
# A new SQLite store: what every SQLite migration leaves, created at once.
_NEW_STORE = sqlite.step(final_schema(op for m in MIGRATIONS if not m.postgresql_only
                                      for op in m.operations))
# What each dialect (``Backend.dialect``) records once it is current: version -> name.
RECORDED = {"sqlite": {s.version: s.name for s in SQLITE_STEPS},
            "postgresql": {s.version: s.name for s in POSTGRESQL_STEPS}}


def _create_new(conn: apsw.Connection) -> bool:
    """A new file (nothing in it, no migration recorded) is given at once, in one
    transaction, the schema that every migration leaves (``final_schema``: their data
    steps have no rows to carry), each migration recorded as applied: a first start
    writes one transaction instead of one per migration. False, changing nothing, for a
    file that holds anything (another process created it first, or it is older)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        if (conn.execute(SELECT_APPLIED).fetchone() is not None
                or conn.execute(HAS_OTHER_OBJECTS).fetchone() is not None):
            conn.execute("ROLLBACK")
            return False
        _NEW_STORE(conn)
        applied_at = time.time()
        for version, name, _ in SQLITE_STEPS:
            conn.execute(RECORD_APPLIED, (version, name, applied_at))
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return True


def migrate(conn: apsw.Connection) -> int:
    """Apply every SQLite migration not yet recorded; return the schema version.

    A store whose migrations are all recorded is opened without a write transaction:
    every process (a hook's included) opens the store, and a reader must not wait for
    another process's long write to answer. A new file is created at once
    (``_create_new``)."""
    if not pending_migrations(conn):
        return SCHEMA_VERSION
    conn.execute(CREATE_MIGRATIONS_TABLE)
    if _create_new(conn):
        return SCHEMA_VERSION
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
