"""What the store occupies: pages, bytes per table (``dbstat``) and the applied schema."""

from __future__ import annotations

from dataclasses import dataclass

from store.dialect import dialect
from store.sql import Conn, all_rows

__all__ = ["Migration", "PageStats", "applied_migrations", "page_stats", "table_bytes"]

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
    size, count, free = dialect(conn).page_counts(conn)
    return PageStats(int(size), int(count), int(free))


def table_bytes(conn: Conn) -> dict[str, int] | None:
    """Bytes per table, indexes included (on SQLite, the shadow tables of a virtual table,
    FTS5 or vec0, folded into it), largest first; None when SQLite was built without the
    ``dbstat`` virtual table. Reads every page once: seconds on a multi-GB store."""
    return dialect(conn).table_bytes(conn)


def applied_migrations(conn: Conn) -> list[Migration]:
    """The migrations recorded in the store, oldest first (none for an empty file)."""
    if not dialect(conn).has_migrations_table(conn):
        return []
    return [Migration(int(r[0]), str(r[1]), float(r[2])) for r in all_rows(conn, APPLIED)]
