"""The provenance hash chain: every turn's hash covers its content hash, its metadata
and the hash of the turn before it in its session.

    chain_hash = SHA-256(previous chain hash ‖ content hash ‖ session ‖ role ‖
                         created_at ‖ source_key ‖ trace_id)

The first turn of a session follows ``GENESIS`` (32 zero bytes). ``sessions.chain_head``
holds the hash of the session's newest turn, so that the next turn links to it inside
its own write transaction (writers in several processes are serialised by
``BEGIN IMMEDIATE``) and so that losing the newest turn is visible too. A forgotten
turn leaves a tombstone with its hashes (``store.forget``); the chain runs through it.
"""

from __future__ import annotations

import hashlib

from store.dialect import dialect
from store.sql import Conn, all_rows, first

__all__ = ["GENESIS", "backfill_chain", "chain_hash", "session_head"]

GENESIS = bytes(32)
BACKFILL_BATCH = 1_000


def chain_hash(previous: bytes, content_hash: bytes, session: str, role: str,
               created_at: float, source_key: str | None, trace_id: str | None) -> bytes:
    """The chain hash of one turn (length-prefixed fields: no two turns collide by
    shifting text between fields), hashed in one call over its parts joined."""
    parts = [previous, content_hash]
    for value in (session, role, repr(float(created_at)), source_key or "", trace_id or ""):
        data = value.encode("utf-8", "surrogatepass")
        parts += (len(data).to_bytes(4, "big"), data)
    return hashlib.sha256(b"".join(parts)).digest()


SELECT_HEAD = "SELECT id, chain_head, trace_id FROM sessions WHERE name = ?"


def session_head(conn: Conn, session: str) -> tuple[int | None, bytes, str | None]:
    """(session row id or None, the hash the session's next turn links to, the session's
    trace id or None), read in one statement.

    Call inside the write that links the next turn. SQLite has one writer at a time. On
    PostgreSQL a transaction lock makes every other turn writer wait here until this
    one commits, so that a session's chain never forks, and exchange ids are committed
    in order: readers that follow the turns by id (the sync and bus outboxes, the
    provider vectors' backfill) never pass over a turn committed late."""
    dialect(conn).lock_turn_writers(conn)
    row = first(conn, SELECT_HEAD, (session,))
    if row is None:
        return None, GENESIS, None
    return (int(row[0]), bytes(row[1]) if row[1] is not None else GENESIS,
            None if row[2] is None else str(row[2]))


SELECT_SESSIONS = "SELECT id, name FROM sessions ORDER BY id"
SELECT_PAGE = """
SELECT id, content_hash, role, created_at, source_key, trace_id FROM exchanges
WHERE session_id = ? AND id > ? ORDER BY id LIMIT ?"""
SET_CHAIN = "UPDATE exchanges SET chain_hash = ? WHERE id = ?"
SET_HEAD = "UPDATE sessions SET chain_head = ? WHERE id = ?"


def backfill_chain(conn: Conn) -> None:
    """Chain every stored turn, session by session in id order, a page at a time (a
    store of a million turns is never held in memory). Call inside a transaction."""
    for session_id, name in all_rows(conn, SELECT_SESSIONS):
        previous, after = GENESIS, 0
        while True:
            page = all_rows(conn, SELECT_PAGE, (session_id, after, BACKFILL_BATCH))
            for exchange_id, content_hash, role, created_at, source_key, trace_id in page:
                previous = chain_hash(previous, bytes(content_hash), name, role, created_at,
                                      source_key, trace_id)
                conn.execute(SET_CHAIN, (previous, exchange_id))
            if len(page) < BACKFILL_BATCH:
                break
            after = page[-1][0]
        conn.execute(SET_HEAD, (previous, session_id))
