"""The SQLite dialect (``store.dialect.Dialect``): FTS5 and sqlite-vec virtual tables,
carray, pragmas, ``dbstat``.

One writer holds the file at a time (``BEGIN IMMEDIATE``), so the locks PostgreSQL
takes are no-ops here; ids come from AUTOINCREMENT, so there are no sequences to move.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

import apsw

from store.keyword_index import queue_entries, queue_removals
from store.search_filter import HitFilter
from store.sql import Conn, Row, all_rows, first, id_list, one
from store.sqlite.search import keyword_hits, scope_token

__all__ = ["SQLITE", "SqliteDialect"]

INSERT_FTS = """
INSERT INTO exchanges_fts(rowid, body, context, dated, scope) VALUES (?, ?, ?, ?, ?)"""
DELETE_FTS = "DELETE FROM exchanges_fts WHERE rowid = ?"
INSERT_VECTOR = (
    "INSERT INTO exchange_vectors(rowid, session_id, embedding) VALUES (?, ?, vec_int8(?))"
)
SELECT_VECTORS = """
SELECT e.id, v.embedding FROM exchanges e JOIN exchange_vectors v ON v.rowid = e.id
WHERE {ids}"""
SELECT_META = "SELECT value FROM meta WHERE key = ?"

# Provenance rows go into large B-trees in key order of the edge, not of time: with
# SQLite's default 2 MB page cache a large graph re-reads pages on every batch. The
# extraction's connection keeps this many KiB of pages instead (it is a batch process),
# and reads none through the store's memory map: every page of the graph's tables it
# touched would stay mapped, in the process's resident memory (100,000 turns: ~230 MB
# more at peak, and no faster).
BULK_CACHE_KIB = 131_072

PAGES = """
SELECT page_size, page_count, freelist_count
FROM pragma_page_size(), pragma_page_count(), pragma_freelist_count()"""
# One row per b-tree (aggregate mode), attributed to the table it belongs to: an index
# counts towards its table. sqlite_schema itself is not a row of sqlite_schema.
OBJECT_BYTES = """
SELECT coalesce(s.tbl_name, d.name), sum(d.pgsize)
FROM dbstat('main', 1) AS d LEFT JOIN sqlite_schema AS s ON s.name = d.name
GROUP BY 1"""
VIRTUAL_TABLES = """
SELECT name FROM sqlite_schema WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%'"""
MIGRATIONS_TABLE = """
SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'"""

SELECT_FTS_SESSION = """
SELECT rowid FROM exchanges_fts WHERE exchanges_fts MATCH ?3 AND rowid > ?1 AND rowid <= ?2"""
# vec0 keeps its rowids in an ordinary table (`<name>_rowids`) that can seek by range;
# the virtual table itself cannot (see store.vectors).
SELECT_VECTOR_IDS = "SELECT rowid FROM exchange_vectors_rowids WHERE rowid > ? AND rowid <= ?"

# A forgotten newest turn leaves only its tombstone: its id is never given out again.
EXCHANGE_SEQUENCE = """
INSERT INTO sqlite_sequence(name, seq)
SELECT 'exchanges', coalesce(max(exchange_id), 0) FROM forgotten
WHERE NOT EXISTS(SELECT 1 FROM sqlite_sequence WHERE name = 'exchanges');
UPDATE sqlite_sequence SET seq = max(seq, (SELECT coalesce(max(exchange_id), 0) FROM forgotten))
WHERE name = 'exchanges'"""


class SqliteDialect:
    name = "sqlite"

    # --- keyword search ---------------------------------------------------------------------

    def keyword_hits(self, conn: Conn, expression: str, flt: HitFilter, limit: int, *,
                     caller_syntax: bool) -> list[tuple[int, float]]:
        return keyword_hits(conn, expression, flt, limit, caller_syntax=caller_syntax)

    def syntax_notes(self, expression: str, *, caller_syntax: bool) -> list[str]:
        return []  # FTS5 itself runs the expression

    # --- a turn's index entries -------------------------------------------------------------

    def index_keywords(self, conn: Conn, exchange_id: int, session_id: int, content: str,
                       context: str, dated: str) -> None:
        conn.execute(INSERT_FTS, (exchange_id, content, context, dated,
                                  scope_token(session_id)))
        queue_entries(conn, [(exchange_id, context, dated)])

    def index_keyword_page(self, conn: Conn,
                           entries: Sequence[tuple[int, int, str, str, str]]) -> None:
        conn.executemany(INSERT_FTS, [
            (exchange_id, content, context, dated, scope_token(session_id))
            for exchange_id, session_id, content, context, dated in entries])
        queue_entries(conn, [(exchange_id, context, dated)
                             for exchange_id, _, _, context, dated in entries])

    def unindex_keywords(self, conn: Conn, ids: Sequence[int]) -> None:
        conn.executemany(DELETE_FTS, [(i,) for i in ids])
        queue_removals(conn, ids)

    def insert_vector(self, conn: Conn, exchange_id: int, session_id: int,
                      blob: bytes) -> None:
        conn.execute(INSERT_VECTOR, (exchange_id, session_id, blob))

    def insert_exchanges(self, conn: Conn, sql: str, rows: Sequence[Sequence[Any]]
                         ) -> list[int]:
        return [int(r[0]) for r in conn.executemany(sql, rows)]

    def insert_vectors(self, conn: Conn, rows: Sequence[tuple[int, int, bytes]]) -> None:
        if rows:
            conn.executemany(INSERT_VECTOR, rows)

    def vectors_of(self, conn: Conn, ids: Sequence[int]) -> dict[int, bytes]:
        where, params = id_list("e.id", ids)
        return {int(i): bytes(blob) for i, blob in
                all_rows(conn, SELECT_VECTORS.format(ids=where), params)}

    # --- writers ----------------------------------------------------------------------------

    def lock_turn_writers(self, conn: Conn) -> None:
        pass  # the write transaction already holds the file's one write lock

    def lock_turn(self, conn: Conn, exchange_id: int) -> None:
        pass  # the write transaction already holds the file's one write lock

    def locked_count(self, conn: Conn, key: str) -> int:
        row = first(conn, SELECT_META, (key,))  # the write lock excludes other writers
        return int(row[0]) if row is not None else 0

    def insert_rows(self, conn: Conn, table: str, columns: Sequence[str],
                    rows: Sequence[Sequence[Any]]) -> None:
        """One prepared statement for every row."""
        if not rows:
            return
        marks = ", ".join("?" * len(columns))
        conn.executemany(f"INSERT INTO {table}({', '.join(columns)}) VALUES ({marks})", rows)

    # --- a turn's text ----------------------------------------------------------------------

    # The trimmed text's last bytes, read from it as a BLOB: ``substr`` of a TEXT value
    # from its end counts every character of the value first (UTF-8), which for the 50
    # turns of the answers' lookup was about 4% of a session search's instructions.
    asks = ("substr(CAST(rtrim(e.content, ' \t\r\n') AS BLOB), -1) = X'3F'"
            " OR substr(CAST(rtrim(e.content, ' \t\r\n') AS BLOB), -3) = X'EFBC9F'")

    # --- bulk statements over a list of integers --------------------------------------------

    int_table = "carray(?1)"

    def int_array(self, values: list[int]) -> object:
        return apsw.carray(array("q", values))

    def prepare_bulk_write(self, conn: Conn) -> None:
        conn.execute(f"PRAGMA cache_size = -{BULK_CACHE_KIB}")
        conn.execute("PRAGMA mmap_size = 0")

    # --- what the store occupies ------------------------------------------------------------

    def page_counts(self, conn: Conn) -> Row:
        return one(conn, PAGES)

    def table_bytes(self, conn: Conn) -> dict[str, int] | None:
        """From ``dbstat``, the shadow tables of a virtual table (FTS5, vec0) folded into
        it; None when SQLite was built without ``dbstat``."""
        try:
            rows = all_rows(conn, OBJECT_BYTES)
        except apsw.SQLError as ex:
            if "dbstat" in str(ex):
                return None
            raise
        virtual = sorted((str(r[0]) for r in all_rows(conn, VIRTUAL_TABLES)), key=len,
                         reverse=True)
        out: dict[str, int] = {}
        for name, size in rows:
            owner = next((v for v in virtual if str(name).startswith(v + "_")), str(name))
            out[owner] = out.get(owner, 0) + int(size)
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))

    def has_migrations_table(self, conn: Conn) -> bool:
        return bool(one(conn, MIGRATIONS_TABLE)[0])

    # --- the contract audit -----------------------------------------------------------------

    def session_keyword_ids(self, conn: Conn, lo: int, hi: int, session_id: int) -> set[int]:
        return {r[0] for r in all_rows(conn, SELECT_FTS_SESSION,
                                       (lo, hi, f'scope : "{scope_token(session_id)}"'))}

    def vector_ids(self, conn: Conn, lo: int, hi: int) -> set[int]:
        return {r[0] for r in all_rows(conn, SELECT_VECTOR_IDS, (lo, hi))}

    # --- copying a store into this one ------------------------------------------------------

    def defer_indexes(self, conn: Conn) -> list[str]:
        return []  # the copy writes SQLite's indexes as it goes

    def advance_sequence(self, conn: Conn, table: str, column: str) -> None:
        pass  # SQLite numbers from the largest id by itself

    def finish_copy(self, conn: Conn, deferred: Sequence[str]) -> None:
        conn.execute(EXCHANGE_SEQUENCE)


SQLITE = SqliteDialect()
