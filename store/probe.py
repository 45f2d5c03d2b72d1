"""Read-only probes of the SQLite build and of an existing store (``stenographer doctor``).

Unlike ``Store``, nothing here creates a file or applies a migration: a diagnosis must
not change what it diagnoses.
"""

from __future__ import annotations

from pathlib import Path

import apsw
import sqlite_vec

from store.footprint import Migration, applied_migrations
from store.sql import one

__all__ = ["fts5_available", "open_existing", "sqlite_vec_version", "store_migrations"]

PROBE_FTS5 = "CREATE VIRTUAL TABLE temp.steno_probe USING fts5(body)"
VEC_VERSION = "SELECT vec_version()"
READ_SCHEMA = "SELECT count(*) FROM sqlite_schema"
PROBE_TIMEOUT_MS = 2_000


def fts5_available() -> bool:
    """Whether this SQLite build can create an FTS5 table (in a throw-away database)."""
    conn = apsw.Connection(":memory:")
    try:
        conn.execute(PROBE_FTS5)
        return True
    except apsw.SQLError:
        return False
    finally:
        conn.close()


def _load_vec(conn: apsw.Connection) -> None:
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.enable_load_extension(False)


def sqlite_vec_version() -> str:
    """The version of the sqlite-vec extension, loaded into a throw-away database;
    raises ``apsw.Error`` (or ``OSError``) when it cannot be loaded."""
    conn = apsw.Connection(":memory:")
    try:
        _load_vec(conn)
        return str(one(conn, VEC_VERSION)[0])
    finally:
        conn.close()


def open_existing(path: Path) -> apsw.Connection:
    """Open a store file that must already exist (never creates one), with sqlite-vec
    loaded, and read its schema so that a file that is not a database fails here."""
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READWRITE)
    try:
        conn.set_busy_timeout(PROBE_TIMEOUT_MS)
        _load_vec(conn)
        one(conn, READ_SCHEMA)
    except BaseException:
        conn.close()
        raise
    return conn


def store_migrations(path: Path) -> list[Migration]:
    """The migrations applied to an existing store file."""
    conn = open_existing(path)
    try:
        return applied_migrations(conn)
    finally:
        conn.close()
