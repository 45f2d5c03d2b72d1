"""Milestones: turns flagged as tier-A priority."""

from __future__ import annotations

from dataclasses import dataclass

from store.dialect import dialect
from store.sql import Conn, all_rows, first

__all__ = [
    "Milestone", "exchange_session", "mark_milestone", "milestone_ids", "session_milestones",
]


@dataclass(frozen=True)
class Milestone:
    exchange_id: int
    label: str
    created_at: float
    role: str
    excerpt: str
    brief_id: int | None


UPSERT_MILESTONE = """
INSERT INTO milestones(exchange_id, session_id, label, created_at) VALUES (?, ?, ?, ?)
ON CONFLICT(exchange_id) DO UPDATE SET label = excluded.label"""
# {ints}: the dialect's table of the turn ids bound as ?1.
SELECT_LABELS = """
SELECT exchange_id, label FROM milestones WHERE exchange_id IN (SELECT value FROM {ints})"""
SELECT_BRIEF_OF = "SELECT brief_id FROM exchanges WHERE id = ?"
SELECT_EXCHANGE_SESSION = "SELECT session_id FROM exchanges WHERE id = ?"
SELECT_SESSION_MILESTONES = """
SELECT m.exchange_id, m.label, m.created_at, e.role, substr(e.content, 1, ?3), e.brief_id
FROM milestones m JOIN exchanges e ON e.id = m.exchange_id
WHERE m.session_id = ?1 ORDER BY m.exchange_id DESC LIMIT ?2"""


def exchange_session(conn: Conn, exchange_id: int) -> int | None:
    row = first(conn, SELECT_EXCHANGE_SESSION, (exchange_id,))
    return None if row is None else int(row[0])


def mark_milestone(conn: Conn, session_id: int, exchange_id: int, label: str,
                   now: float) -> int | None:
    """Flag a turn (marking it again replaces the label); return its brief id, if any.

    Call inside a write. A compression that claims the turn at the same time either
    committed before the brief is read here (its brief id is returned) or reads the
    label after this write committed (``nodes.publish.brief.claimed_brief``).
    """
    conn.execute(UPSERT_MILESTONE, (exchange_id, session_id, label, now))
    dialect(conn).lock_turn(conn, exchange_id)  # a claim in progress ends first
    row = first(conn, SELECT_BRIEF_OF, (exchange_id,))
    return None if row is None or row[0] is None else int(row[0])


def session_milestones(conn: Conn, session_id: int, limit: int,
                       excerpt_chars: int = 200) -> list[Milestone]:
    """The newest ``limit`` milestones of a session, oldest first."""
    rows = [
        Milestone(int(r[0]), str(r[1]), float(r[2]), str(r[3]), str(r[4]),
                  None if r[5] is None else int(r[5]))
        for r in all_rows(conn, SELECT_SESSION_MILESTONES, (session_id, limit, excerpt_chars))
    ]
    rows.reverse()
    return rows


def milestone_ids(conn: Conn, exchange_ids: list[int]) -> dict[int, str]:
    """Labels of those of ``exchange_ids`` that are milestones."""
    if not exchange_ids:
        return {}
    sql_dialect = dialect(conn)  # the ids bound as one array: one plan whatever their number
    sql = SELECT_LABELS.replace("{ints}", sql_dialect.int_table)
    return {int(r[0]): str(r[1])
            for r in all_rows(conn, sql, (sql_dialect.int_array(list(exchange_ids)),))}
