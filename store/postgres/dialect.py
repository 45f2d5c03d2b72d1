"""The PostgreSQL dialect (``store.dialect.Dialect``): a weighted tsvector and a pgvector
``halfvec`` per turn (searched in each process's copy, ``store.postgres.vectors``),
arrays, COPY, advisory and row locks, sequences.

Several server processes write one database at once (READ COMMITTED), so the writes
that SQLite serialises by its one write lock take locks here: the turn writers' lock
and the row lock of a counter in ``meta``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, cast

from store.postgres.search import keyword_hits, query_notes
from store.postgres.vectors import int8_blob, vector_text
from store.search_filter import HitFilter
from store.sql import Conn, Row, all_rows, first, id_list, one

__all__ = ["POSTGRESQL", "PgDialect"]


def _document(content: str, context: str, dated: str) -> str:
    """The weighted tsvector of a turn (store.postgres.schema): its own words A, its
    month and year B, the words it borrows from the turns before it C."""
    return (f"setweight(to_tsvector('english', {content}), 'A') || "
            f"setweight(to_tsvector('english', {dated}), 'B') || "
            f"setweight(to_tsvector('english', {context}), 'C')")


INSERT_FTS = f"""
INSERT INTO exchanges_fts(rowid, session_id, doc)
VALUES (?1, ?5, {_document("?2", "?3", "?4")})"""
# A page of keyword index entries in one statement: ?1 rowids, ?2 sessions, ?3 contents,
# ?4 context words, ?5 dated words (arrays in that order).
INSERT_FTS_PAGE = f"""
INSERT INTO exchanges_fts(rowid, session_id, doc)
SELECT r, s, {_document("c", "x", "d")}
FROM unnest(CAST(?1 AS BIGINT[]), CAST(?2 AS BIGINT[]), CAST(?3 AS TEXT[]), CAST(?4 AS TEXT[]),
            CAST(?5 AS TEXT[])) AS page(r, s, c, x, d)"""
DELETE_FTS = "DELETE FROM exchanges_fts WHERE rowid = ?"
# A batch's turns in one statement (the columns of store.exchanges.INSERT_EXCHANGE, as
# arrays in that order): a statement a turn, even pipelined, is parsed, bound and
# started once a turn (the server's CPU for 2,000 turns' rows: 65-105 us a turn, 15-25
# in one statement). The rows go in in the arrays' order, so each draws its id from the
# sequence in that order: the ids sorted are the rows' ids in order.
INSERT_EXCHANGES = """
INSERT INTO exchanges(session_id, role, created_at, content, content_hash, signals,
                      source_key, trace_id, chain_hash)
SELECT s, r, a, c, h, g, k, t, x
FROM unnest(CAST(?1 AS BIGINT[]), CAST(?2 AS TEXT[]), CAST(?3 AS DOUBLE PRECISION[]),
            CAST(?4 AS TEXT[]), CAST(?5 AS BYTEA[]), CAST(?6 AS TEXT[]), CAST(?7 AS TEXT[]),
            CAST(?8 AS TEXT[]), CAST(?9 AS BYTEA[]))
  WITH ORDINALITY AS page(s, r, a, c, h, g, k, t, x, n)
ORDER BY n RETURNING id"""
_EXCHANGE_COLUMNS = 9
INSERT_VECTOR = "INSERT INTO exchange_vectors(rowid, session_id, embedding) VALUES (?, ?, ?)"
VECTOR_COLUMNS = ("rowid", "session_id", "embedding")
SELECT_VECTORS = "SELECT rowid, embedding::text FROM exchange_vectors WHERE {ids}"

LOCK_TURNS = "SELECT pg_advisory_xact_lock(5501)"  # an arbitrary key: the turn writers' lock
LOCK_TURN = "SELECT 1 FROM exchanges WHERE id = ? FOR UPDATE"  # the row a claim updates
# The counter's row exists (at 0) and is locked until the write commits.
INSERT_COUNT = "INSERT INTO meta(key, value) VALUES (?, '0') ON CONFLICT(key) DO NOTHING"
LOCK_COUNT = "SELECT value FROM meta WHERE key = ? FOR UPDATE"

# The database's size in its block size, and each table with its indexes and TOAST data.
PAGES = """
SELECT current_setting('block_size')::bigint,
       pg_database_size(current_database()) / current_setting('block_size')::bigint, 0"""
OBJECT_BYTES = """
SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'r' AND n.nspname = current_schema()"""
MIGRATIONS_TABLE = "SELECT count(to_regclass('schema_migrations'))"

# Both indexes are ordinary tables with a session column.
SELECT_FTS_SESSION = """
SELECT rowid FROM exchanges_fts WHERE session_id = ?3 AND rowid > ?1 AND rowid <= ?2"""
SELECT_VECTOR_IDS = "SELECT rowid FROM exchange_vectors WHERE rowid > ? AND rowid <= ?"

# A GIN index grows a posting list a word at a time: a copy drops it when it starts and
# builds it again in one pass when it finishes.
SELECT_DEFERRED = """
SELECT indexname, indexdef FROM pg_indexes
WHERE schemaname = current_schema()
  AND tablename = 'exchanges_fts' AND indexdef LIKE '% USING gin %'
ORDER BY indexname"""
# Building the index in memory is many times faster than spilling: at least this much
# for the building transaction (a server set higher keeps its own setting).
BUILD_MEMORY_MB = 512
RAISE_BUILD_MEMORY = f"""
SELECT set_config('maintenance_work_mem', '{BUILD_MEMORY_MB}MB', true)
WHERE pg_size_bytes(current_setting('maintenance_work_mem')) < {BUILD_MEMORY_MB} * 1024 * 1024"""
SET_SEQUENCE = """
SELECT setval(pg_get_serial_sequence('{table}', '{column}'), m)
FROM (SELECT max({column}) AS m FROM {table}) AS top WHERE m IS NOT NULL"""
# A forgotten newest turn leaves only its tombstone: its id is never given out again.
SET_EXCHANGE_SEQUENCE = """
SELECT setval(pg_get_serial_sequence('exchanges', 'id'), m)
FROM (SELECT greatest((SELECT max(id) FROM exchanges),
                      (SELECT max(exchange_id) FROM forgotten)) AS m) AS top
WHERE m IS NOT NULL"""


class _Copier(Protocol):
    def copy_rows(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]
                  ) -> None: ...


class PgDialect:
    name = "postgresql"

    # --- keyword search ---------------------------------------------------------------------

    def keyword_hits(self, conn: Conn, expression: str, flt: HitFilter, limit: int, *,
                     caller_syntax: bool) -> list[tuple[int, float]]:
        return keyword_hits(conn, expression, flt, limit, own_words=caller_syntax)

    def syntax_notes(self, expression: str, *, caller_syntax: bool) -> list[str]:
        return query_notes(expression, own_words=caller_syntax)

    # --- a turn's index entries -------------------------------------------------------------

    def index_keywords(self, conn: Conn, exchange_id: int, session_id: int, content: str,
                       context: str, dated: str) -> None:
        conn.execute(INSERT_FTS, (exchange_id, content, context, dated, session_id))

    def index_keyword_page(self, conn: Conn,
                           entries: Sequence[tuple[int, int, str, str, str]]) -> None:
        fields = [[entry[i] for entry in entries] for i in range(5)]  # five arrays
        conn.execute(INSERT_FTS_PAGE, fields)

    def unindex_keywords(self, conn: Conn, ids: Sequence[int]) -> None:
        conn.executemany(DELETE_FTS, [(i,) for i in ids])

    def insert_vector(self, conn: Conn, exchange_id: int, session_id: int,
                      blob: bytes) -> None:
        conn.execute(INSERT_VECTOR, (exchange_id, session_id, vector_text(blob)))

    def insert_exchanges(self, conn: Conn, sql: str, rows: Sequence[Sequence[Any]]
                         ) -> list[int]:
        """One statement for the batch (INSERT_EXCHANGES: ``sql``'s columns as arrays)."""
        if not rows:
            return []
        fields = [[row[i] for row in rows] for i in range(_EXCHANGE_COLUMNS)]
        return sorted(int(r[0]) for r in all_rows(conn, INSERT_EXCHANGES, fields))

    def insert_vectors(self, conn: Conn, rows: Sequence[tuple[int, int, bytes]]) -> None:
        self.insert_rows(conn, "exchange_vectors", VECTOR_COLUMNS,
                         [(i, s, vector_text(v)) for i, s, v in rows])

    def vectors_of(self, conn: Conn, ids: Sequence[int]) -> dict[int, bytes]:
        where, params = id_list("rowid", ids)
        return {int(i): int8_blob(str(text)) for i, text in
                all_rows(conn, SELECT_VECTORS.format(ids=where), params)}

    # --- writers ----------------------------------------------------------------------------

    def lock_turn_writers(self, conn: Conn) -> None:
        conn.execute(LOCK_TURNS)

    def lock_turn(self, conn: Conn, exchange_id: int) -> None:
        conn.execute(LOCK_TURN, (exchange_id,))

    def locked_count(self, conn: Conn, key: str) -> int:
        conn.execute(INSERT_COUNT, (key,))
        row = first(conn, LOCK_COUNT, (key,))
        return int(row[0]) if row is not None else 0

    def insert_rows(self, conn: Conn, table: str, columns: Sequence[str],
                    rows: Sequence[Sequence[Any]]) -> None:
        """COPY: one stream instead of a statement a row."""
        if not rows:
            return
        cast(_Copier, conn).copy_rows(table, columns, rows)

    # --- a turn's text ----------------------------------------------------------------------

    asks = "right(rtrim(e.content, ' \t\r\n'), 1) IN ('?', '？')"

    # --- bulk statements over a list of integers --------------------------------------------

    int_table = "unnest(CAST(?1 AS BIGINT[])) AS packed(value)"

    def int_array(self, values: list[int]) -> object:
        return values

    def prepare_bulk_write(self, conn: Conn) -> None:
        pass  # the server's own settings serve its connections

    # --- what the store occupies ------------------------------------------------------------

    def page_counts(self, conn: Conn) -> Row:
        return one(conn, PAGES)

    def table_bytes(self, conn: Conn) -> dict[str, int] | None:
        rows = all_rows(conn, OBJECT_BYTES)
        return dict(sorted(((str(n), int(b)) for n, b in rows), key=lambda kv: (-kv[1], kv[0])))

    def has_migrations_table(self, conn: Conn) -> bool:
        return bool(one(conn, MIGRATIONS_TABLE)[0])

    # --- the contract audit -----------------------------------------------------------------

    def session_keyword_ids(self, conn: Conn, lo: int, hi: int, session_id: int) -> set[int]:
        return {r[0] for r in all_rows(conn, SELECT_FTS_SESSION, (lo, hi, session_id))}

    def vector_ids(self, conn: Conn, lo: int, hi: int) -> set[int]:
        return {r[0] for r in all_rows(conn, SELECT_VECTOR_IDS, (lo, hi))}

    # --- copying a store into this one ------------------------------------------------------

    def defer_indexes(self, conn: Conn) -> list[str]:
        found = all_rows(conn, SELECT_DEFERRED)
        for name, _ in found:
            conn.execute(f'DROP INDEX "{name}"')
        return [str(definition) for _, definition in found]

    def advance_sequence(self, conn: Conn, table: str, column: str) -> None:
        conn.execute(SET_SEQUENCE.format(table=table, column=column))

    def finish_copy(self, conn: Conn, deferred: Sequence[str]) -> None:
        conn.execute(SET_EXCHANGE_SEQUENCE)
        if deferred:
            conn.execute(RAISE_BUILD_MEMORY)
        for statement in deferred:
            conn.execute(statement)


POSTGRESQL = PgDialect()
