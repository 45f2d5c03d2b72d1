"""Cursors: how far each followed stream (a transcript file) has been read (migration 8).

A cursor moves forward only after the records before it were stored; the records carry
their own idempotency key (``exchanges.source_key``), so a cursor that lags behind after
a crash makes the next pass re-read and find them "already captured", never store them
twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from store.sql import Conn, all_rows, first, one

__all__ = ["Cursor", "CursorAdvance", "advance_cursor", "cursor_totals", "get_cursor",
           "recent_cursors"]


@dataclass(frozen=True)
class Cursor:
    kind: str
    name: str
    position: int
    lines: int
    identity: str | None
    head: str | None
    session: str | None
    captured: int = 0
    duplicates: int = 0
    skipped: int = 0
    resets: int = 0
    last_success_at: float | None = None
    last_error: str | None = None
    last_error_at: float | None = None
    updated_at: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class CursorAdvance:
    """Where a stream now stands, and what the pass that moved it did."""

    kind: str
    name: str
    position: int
    lines: int
    identity: str | None
    head: str | None
    session: str | None
    at: float
    captured: int = 0
    duplicates: int = 0
    skipped: int = 0
    resets: int = 0
    ok: bool = True  # the pass read and stored what it could (sets last_success_at)
    error: str | None = None  # a problem to report: a skipped line, or why the pass failed


_COLUMNS = """kind, name, position, lines, identity, head, session, captured, duplicates,
       skipped, resets, last_success_at, last_error, last_error_at, updated_at"""
SELECT_CURSOR = f"SELECT {_COLUMNS} FROM cursors WHERE kind = ? AND name = ?"
# Peers' cursors have kinds with a colon (``outbox:sync``); followed files' kinds do not.
_PEERS = "(instr(kind, ':') > 0) = ?"
SELECT_RECENT = f"""SELECT {_COLUMNS} FROM cursors WHERE {_PEERS}
ORDER BY updated_at DESC, name LIMIT ?"""
# Counts add up; the last error stays until a later error replaces it (status shows when
# it happened next to the last success, so a cleared problem is visible as older).
UPSERT_CURSOR = """
INSERT INTO cursors(kind, name, position, lines, identity, head, session, captured,
                    duplicates, skipped, resets, last_success_at, last_error, last_error_at,
                    updated_at)
VALUES (:kind, :name, :position, :lines, :identity, :head, :session, :captured,
        :duplicates, :skipped, :resets,
        CASE WHEN :ok THEN :at END, :error,
        CASE WHEN :error IS NOT NULL THEN :at END, :at)
ON CONFLICT(kind, name) DO UPDATE SET
  position = excluded.position, lines = excluded.lines, identity = excluded.identity,
  head = excluded.head, session = coalesce(excluded.session, cursors.session),
  captured = cursors.captured + excluded.captured,
  duplicates = cursors.duplicates + excluded.duplicates,
  skipped = cursors.skipped + excluded.skipped, resets = cursors.resets + excluded.resets,
  last_success_at = coalesce(excluded.last_success_at, cursors.last_success_at),
  last_error = coalesce(excluded.last_error, cursors.last_error),
  last_error_at = coalesce(excluded.last_error_at, cursors.last_error_at),
  updated_at = excluded.updated_at"""
TOTALS = f"""
SELECT kind, count(*), coalesce(sum(position), 0), coalesce(sum(captured), 0),
       coalesce(sum(duplicates), 0), coalesce(sum(skipped), 0), coalesce(sum(resets), 0),
       max(last_success_at), max(last_error_at)
FROM cursors WHERE {_PEERS} GROUP BY kind ORDER BY kind"""
LAST_ERROR = f"""
SELECT kind, name, last_error, last_error_at FROM cursors
WHERE last_error_at IS NOT NULL AND {_PEERS} ORDER BY last_error_at DESC LIMIT 1"""


def _cursor(row: tuple[Any, ...]) -> Cursor:
    return Cursor(*row)


def get_cursor(conn: Conn, kind: str, name: str) -> Cursor | None:
    row = first(conn, SELECT_CURSOR, (kind, name))
    return None if row is None else _cursor(row)


def advance_cursor(conn: Conn, step: CursorAdvance) -> Cursor:
    """Record where a stream stands now (call inside a write); returns the stored cursor."""
    conn.execute(UPSERT_CURSOR, dict(step.__dict__))
    return _cursor(one(conn, SELECT_CURSOR, (step.kind, step.name)))


def recent_cursors(conn: Conn, limit: int, *, peers: bool = False) -> list[Cursor]:
    """The ``limit`` most recently updated cursors of followed files (of peers, when
    ``peers``)."""
    return [_cursor(r) for r in all_rows(conn, SELECT_RECENT, (peers, limit))]


def cursor_totals(conn: Conn, *, peers: bool = False) -> dict[str, Any]:
    """Per kind: streams, bytes read, turns captured, duplicates, skipped lines, resets,
    the last success and the last error time; plus the newest error overall. Files'
    cursors, or peers' when ``peers``."""
    kinds = {
        r[0]: {"files": r[1], "bytes_read": r[2], "captured": r[3], "duplicates": r[4],
               "skipped": r[5], "resets": r[6], "last_success_at": r[7],
               "last_error_at": r[8]}
        for r in all_rows(conn, TOTALS, (peers,))
    }
    err = first(conn, LAST_ERROR, (peers,))
    last_error = None if err is None else {"kind": err[0], "file": err[1],
                                          "error": err[2], "at": err[3]}
    return {"kinds": kinds, "last_error": last_error}
