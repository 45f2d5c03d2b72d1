"""NAFE reasoning-drift flags of stored turns (migration 6): written with the turn,
read by the running notes, search hits and the flag search filter."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from store.sql import Conn, all_rows

__all__ = ["StoredFlag", "flags_by_exchange", "record_batch_flags", "record_flags", "session_flags"]


@dataclass(frozen=True)
class StoredFlag:
    exchange_id: int
    signature: str
    span: str
    start: int
    end: int


INSERT_FLAG = """
INSERT INTO signal_flags(exchange_id, session_id, signature, span_start, span_end, span)
VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"""
SELECT_FLAGS = "SELECT exchange_id, signature, span, span_start, span_end FROM signal_flags"
SELECT_SESSION_FLAGS = SELECT_FLAGS + """
WHERE session_id = ? ORDER BY exchange_id DESC, span_start LIMIT ?"""


def record_flags(conn: Conn, exchange_id: int, session_id: int,
                 flags: Sequence[StoredFlag]) -> None:
    """Store a turn's flags. Call inside the write that stores the turn."""
    for f in flags:
        conn.execute(INSERT_FLAG, (exchange_id, session_id, f.signature, f.start, f.end, f.span))


def record_batch_flags(conn: Conn, flags: Sequence[tuple[int, int, StoredFlag]]) -> None:
    """Store the flags (exchange id, session id, flag) of a batch's turns with one
    statement for all (pipelined on PostgreSQL). Call inside the write that stores them."""
    if flags:
        conn.executemany(INSERT_FLAG, [(e, s, f.signature, f.start, f.end, f.span)
                                       for e, s, f in flags])


def flags_by_exchange(conn: Conn, ids: Sequence[int]) -> dict[int, list[StoredFlag]]:
    """The flags of each of ``ids`` that has any, in stored order."""
    if not ids:
        return {}
    sql = SELECT_FLAGS + f" WHERE exchange_id IN ({','.join('?' * len(ids))})" \
        " ORDER BY exchange_id, span_start"
    out: dict[int, list[StoredFlag]] = {}
    for row in all_rows(conn, sql, ids):
        out.setdefault(int(row[0]), []).append(StoredFlag(*row))
    return out


def session_flags(conn: Conn, session_id: int, limit: int) -> list[StoredFlag]:
    """The newest ``limit`` flags of a session, oldest first."""
    rows = [StoredFlag(*r) for r in all_rows(conn, SELECT_SESSION_FLAGS, (session_id, limit))]
    rows.reverse()
    return rows
