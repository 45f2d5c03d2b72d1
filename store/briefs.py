"""Briefs: the atomic claim of a batch of turns, and the reads of briefs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from store.sql import Conn, Row, all_rows, one

__all__ = ["Brief", "BriefDraft", "ClaimLost", "briefs_by_ids", "claim_brief", "session_briefs"]


class ClaimLost(Exception):
    """Another writer compressed some of these turns first; the claim rolls back."""


@dataclass(frozen=True)
class BriefDraft:
    session_id: int
    tier: str
    body: str
    created_at: float
    sources: tuple[tuple[int, bytes], ...]  # (exchange id, content hash), oldest first


@dataclass(frozen=True)
class Brief:
    id: int
    session: str
    tier: str
    created_at: float
    first_exchange_id: int
    last_exchange_id: int
    turns: int
    body: str
    source_ids: tuple[int, ...]


INSERT_BRIEF = """
INSERT INTO briefs(session_id, tier, created_at, first_exchange_id, last_exchange_id, turns, body)
VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id"""
INSERT_SOURCE = "INSERT INTO brief_sources(brief_id, exchange_id, content_hash) VALUES (?, ?, ?)"
# The turns, each by its id and content hash: {} is one "(?, ?)" a turn.
CLAIM_TURNS = """
UPDATE exchanges SET brief_id = ?
WHERE session_id = ? AND brief_id IS NULL AND (id, content_hash) IN (VALUES {})"""
SELECT_BRIEF = """
SELECT b.id, s.name, b.tier, b.created_at, b.first_exchange_id, b.last_exchange_id, b.turns,
       b.body, (SELECT group_concat(exchange_id) FROM brief_sources WHERE brief_id = b.id)
FROM briefs b JOIN sessions s ON s.id = b.session_id"""
SELECT_SESSION_BRIEFS = SELECT_BRIEF + " WHERE b.session_id = ? ORDER BY b.id DESC LIMIT ?"


def claim_brief(conn: Conn, draft: BriefDraft) -> int:
    """Write a brief and mark its source turns compressed, all or nothing.

    Call inside a write transaction. Each turn is claimed only if it is still
    uncompressed and unchanged; if any is not, ``ClaimLost`` is raised and the caller's
    transaction rolls back, so no turn is ever in two briefs and no brief is partial.
    """
    ids = [i for i, _ in draft.sources]
    brief_id: int = one(
        conn,
        INSERT_BRIEF,
        (draft.session_id, draft.tier, draft.created_at, ids[0], ids[-1], len(ids), draft.body),
    )[0]
    pairs = ", ".join(["(?, ?)"] * len(ids))
    conn.execute(CLAIM_TURNS.format(pairs), (brief_id, draft.session_id,
                                            *(v for source in draft.sources for v in source)))
    if conn.changes() != len(ids):
        raise ClaimLost(f"some of turns #{ids[0]}-#{ids[-1]} were compressed by another "
                        "writer")
    conn.executemany(INSERT_SOURCE, [(brief_id, i, h) for i, h in draft.sources])
    return brief_id


def _row(row: Row) -> Brief:
    sources = str(row[8] or "")
    return Brief(
        id=row[0],
        session=row[1],
        tier=row[2],
        created_at=row[3],
        first_exchange_id=row[4],
        last_exchange_id=row[5],
        turns=row[6],
        body=row[7],
        source_ids=tuple(sorted(int(s) for s in sources.split(",") if s)),
    )


def session_briefs(conn: Conn, session_id: int, limit: int) -> list[Brief]:
    """The newest ``limit`` briefs of a session, oldest first."""
    rows = [_row(r) for r in all_rows(conn, SELECT_SESSION_BRIEFS, (session_id, limit))]
    rows.reverse()
    return rows


def briefs_by_ids(conn: Conn, ids: Sequence[int]) -> dict[int, Brief]:
    if not ids:
        return {}
    sql = SELECT_BRIEF + f" WHERE b.id IN ({','.join('?' * len(ids))})"
    return {b.id: b for b in (_row(r) for r in all_rows(conn, sql, ids))}
