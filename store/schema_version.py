"""The SQLite store's schema version and whether a file is at it, read without building
the migration list.

``store.migrations`` declares every migration and renders it (a hundred objects of
``store.schema``, and the schema a new file is given at once); a process opening a store
that is already current needs none of that, only to read which migrations the file
records. Each SQLite migration is numbered from 1 in list order, so a file is current
when it records ``1 .. SCHEMA_VERSION``. ``store.migrations`` checks at import that
``SCHEMA_VERSION`` is the length of its SQLite list: a migration added without raising
it fails every process that migrates, and the tests, at once.
"""

from __future__ import annotations

import apsw

__all__ = ["CREATE_MIGRATIONS_TABLE", "HAS_MIGRATIONS_TABLE", "SCHEMA_VERSION", "SELECT_APPLIED",
           "pending_migrations"]

SCHEMA_VERSION = 16  # SQLite's migrations (store.migrations.SQLITE_STEPS)

CREATE_MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations(
  version INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  applied_at REAL NOT NULL
)"""
SELECT_APPLIED = "SELECT version FROM schema_migrations"
HAS_MIGRATIONS_TABLE = """
SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"""


def pending_migrations(conn: apsw.Connection) -> int:
    """How many migrations ``store.migrations.migrate`` would apply, read in one snapshot
    without a lock or a write (so a store opened read-only can tell whether it is
    current)."""
    with conn:  # a read transaction: both statements see the same state
        if conn.execute(HAS_MIGRATIONS_TABLE).fetchone() is None:
            return SCHEMA_VERSION
        applied = {row[0] for row in conn.execute(SELECT_APPLIED)}
    return sum(version not in applied for version in range(1, SCHEMA_VERSION + 1))
