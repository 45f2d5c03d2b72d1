"""Stores as earlier releases left them, for the migration tests."""

from __future__ import annotations

import time
from pathlib import Path

import apsw
import sqlite_vec

from store.migrations import CREATE_MIGRATIONS_TABLE, RECORD_APPLIED, SQLITE_STEPS

__all__ = ["store_at_schema"]


def store_at_schema(path: Path, version: int) -> apsw.Connection:
    """A new SQLite store at ``path`` migrated to schema ``version`` only (the first
    ``version`` migrations, recorded as applied), open for the test to fill."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = apsw.Connection(str(path))
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.execute(CREATE_MIGRATIONS_TABLE)
    for number, name, step in SQLITE_STEPS[:version]:
        step(conn)
        conn.execute(RECORD_APPLIED, (number, name, time.time()))
    return conn
