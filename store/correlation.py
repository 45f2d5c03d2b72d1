"""Trace ids: the id every turn carries for cross-system correlation.

A turn's trace id is the one its ingest names or, when none is named, its session's:
created once per session (migration 6 added ``sessions.trace_id``) and kept.
"""

from __future__ import annotations

from store.sql import Conn, first

__all__ = ["exchange_trace", "turn_trace_sql"]


def turn_trace_sql(turn: str, session: str | None = None) -> str:
    """The SQL value of a turn's trace id, for a row ``turn`` of ``exchanges`` joined to
    its row ``session`` of ``sessions`` (None: not joined, looked up).

    Most turns carry their session's trace id (``sessions.trace_id``, set once and
    kept), so ``exchanges.trace_id`` holds it only when it differs: NULL means the
    session's, '' none (a turn recorded before trace ids, migration 12).
    """
    session_trace = (f"{session}.trace_id" if session is not None else
                     f"(SELECT s.trace_id FROM sessions s WHERE s.id = {turn}.session_id)")
    return f"nullif(coalesce({turn}.trace_id, {session_trace}), '')"


SELECT_EXCHANGE_TRACE = f"""
SELECT {turn_trace_sql("e", "s")} FROM exchanges e JOIN sessions s ON s.id = e.session_id
WHERE e.id = ?"""


def exchange_trace(conn: Conn, exchange_id: int) -> str | None:
    row = first(conn, SELECT_EXCHANGE_TRACE, (exchange_id,))
    return None if row is None or row[0] is None else str(row[0])
