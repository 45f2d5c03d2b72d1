"""Reads for the inspector: sessions with counts, one turn's neighbours, brief sources,
recent runs without the inspector's own reads.

Every statement is bounded (``LIMIT``) and served by an index: the session list reads
``sessions`` plus per-session index counts, a turn's neighbours read
``exchanges_by_session``, brief sources the ``brief_sources`` primary key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from store.sql import Conn, all_rows, first, one

__all__ = [
    "SessionSummary",
    "brief_source_hashes",
    "count_sessions",
    "list_sessions",
    "recent_runs_except",
    "recent_runs_sql",
    "session_neighbours",
]


@dataclass(frozen=True)
class SessionSummary:
    name: str
    created_at: float
    last_at: float
    turns: int
    live: int
    briefs: int
    milestones: int


# Counts per session come from the partial and per-session indexes (exchanges_live,
# briefs_by_session, milestones_by_session), so a page costs O(page), not O(history).
SELECT_SESSIONS = """
SELECT s.name, s.created_at, s.last_at, s.turns,
       (SELECT count(*) FROM exchanges e WHERE e.session_id = s.id AND e.brief_id IS NULL),
       (SELECT count(*) FROM briefs b WHERE b.session_id = s.id),
       (SELECT count(*) FROM milestones m WHERE m.session_id = s.id)
FROM sessions s ORDER BY s.last_at DESC, s.id DESC LIMIT ?1 OFFSET ?2"""
COUNT_SESSIONS = "SELECT count(*) FROM sessions"
SELECT_NEIGHBOURS = """
SELECT (SELECT max(id) FROM exchanges WHERE session_id = ?1 AND id < ?2),
       (SELECT min(id) FROM exchanges WHERE session_id = ?1 AND id > ?2)"""
SELECT_SESSION_OF = "SELECT session_id FROM exchanges WHERE id = ?"
SELECT_SOURCE_HASHES = """
SELECT exchange_id, content_hash FROM brief_sources WHERE brief_id = ? ORDER BY exchange_id"""


def list_sessions(conn: Conn, limit: int, offset: int = 0) -> list[SessionSummary]:
    """Sessions by last activity, newest first."""
    return [
        SessionSummary(str(r[0]), float(r[1]), float(r[2]), int(r[3]), int(r[4]), int(r[5]),
                       int(r[6]))
        for r in all_rows(conn, SELECT_SESSIONS, (limit, offset))
    ]


def count_sessions(conn: Conn) -> int:
    return int(one(conn, COUNT_SESSIONS)[0])


def session_neighbours(conn: Conn, exchange_id: int
                       ) -> tuple[int | None, int | None]:
    """The previous and next turn ids of the same session (None at either end)."""
    owner = first(conn, SELECT_SESSION_OF, (exchange_id,))
    if owner is None:
        return None, None
    row = one(conn, SELECT_NEIGHBOURS, (owner[0], exchange_id))
    return (None if row[0] is None else int(row[0]), None if row[1] is None else int(row[1]))


def brief_source_hashes(conn: Conn, brief_id: int) -> dict[int, bytes]:
    """The content hash recorded for each source turn when the brief was made."""
    return {int(r[0]): bytes(r[1]) for r in all_rows(conn, SELECT_SOURCE_HASHES, (brief_id,))}


def recent_runs_sql(graph: str | None, exclude: Sequence[str]) -> tuple[str, list[Any]]:
    """The statement for the newest runs of one graph, or of all but ``exclude``."""
    sql = "SELECT run_id, graph, status, started_at, duration_ms FROM runs"
    params: list[Any] = []
    if graph is not None:
        sql += " WHERE graph = ?"
        params.append(graph)
    elif exclude:
        sql += f" WHERE graph NOT IN ({','.join('?' * len(exclude))})"
        params.extend(exclude)
    return sql + " ORDER BY seq DESC LIMIT ?", params


def recent_runs_except(conn: Conn, limit: int, graph: str | None = None,
                       exclude: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The newest ``limit`` runs (of ``graph``, or of every graph not in ``exclude``)."""
    sql, params = recent_runs_sql(graph, exclude)
    return [
        {"run_id": r[0], "graph": r[1], "status": r[2], "started_at": r[3],
         "duration_ms": r[4]}
        for r in all_rows(conn, sql, [*params, limit])
    ]
