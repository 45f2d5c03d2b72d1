"""Versioned schema migrations: ordered, named functions recorded in a table.

Each migration runs in its own ``BEGIN IMMEDIATE`` transaction and re-checks the
recorded version inside it, so several processes opening one new store at once apply
each migration exactly once.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import apsw

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "migrate"]

CREATE_MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations(
  version INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  applied_at REAL NOT NULL
)"""
SELECT_APPLIED = "SELECT version FROM schema_migrations"
RECORD_APPLIED = "INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, ?, ?)"


def m001_initial(conn: apsw.Connection) -> None:
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


MIGRATIONS: list[Callable[[apsw.Connection], None]] = [m001_initial]
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(conn: apsw.Connection) -> int:
    """Apply every migration not yet recorded; return the schema version."""
    conn.execute(CREATE_MIGRATIONS_TABLE)
    for version, step in enumerate(MIGRATIONS, start=1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            applied = {row[0] for row in conn.execute(SELECT_APPLIED)}
            if version not in applied:
                step(conn)
                conn.execute(RECORD_APPLIED, (version, step.__name__, time.time()))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    return SCHEMA_VERSION
