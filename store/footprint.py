"""What the store occupies: pages, bytes per table (``dbstat``) and the applied schema."""

from __future__ import annotations

from dataclasses import dataclass

import apsw

from store.sql import Conn, all_rows, is_postgres, one

__all__ = ["Migration", "PageStats", "applied_migrations", "page_stats", "table_bytes"]

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
# PostgreSQL: the database's size in its block size, and each table with its indexes and
# TOAST data.
PG_PAGES = """
SELECT current_setting('block_size')::bigint,
       pg_database_size(current_database()) / current_setting('block_size')::bigint, 0"""
PG_OBJECT_BYTES = """
SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'r' AND n.nspname = current_schema()"""
PG_MIGRATIONS_TABLE = "SELECT count(to_regclass('schema_migrations'))"
APPLIED = "SELECT version, name, applied_at FROM schema_migrations ORDER BY version"


@dataclass(frozen=True)
class PageStats:
    page_size: int
    page_count: int
    freelist_count: int

    @property
    def database_bytes(self) -> int:
        return self.page_size * self.page_count


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    applied_at: float


def page_stats(conn: Conn) -> PageStats:
    size, count, free = one(conn, PG_PAGES if is_postgres(conn) else PAGES)
    return PageStats(int(size), int(count), int(free))


def table_bytes(conn: Conn) -> dict[str, int] | None:
    """Bytes per table, indexes included and the shadow tables of a virtual table
    (FTS5, vec0) folded into it, largest first; None when SQLite was built without the
    ``dbstat`` virtual table. Reads every page once: seconds on a multi-GB store."""
    if is_postgres(conn):
        rows = all_rows(conn, PG_OBJECT_BYTES)
        return dict(sorted(((str(n), int(b)) for n, b in rows), key=lambda kv: (-kv[1], kv[0])))
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


def applied_migrations(conn: Conn) -> list[Migration]:
    """The migrations recorded in the store, oldest first (none for an empty file)."""
    if not one(conn, PG_MIGRATIONS_TABLE if is_postgres(conn) else MIGRATIONS_TABLE)[0]:
        return []
    return [Migration(int(r[0]), str(r[1]), float(r[2])) for r in all_rows(conn, APPLIED)]
