"""Briefs: the atomic claim of a batch of turns, and the reads of briefs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from store.dialect import dialect
from store.sql import Conn, Row, all_rows, one

__all__ = [
    "Brief", "BriefDraft", "ClaimLost", "briefs_by_ids", "claim_brief", "claim_briefs",
    "session_briefs",
]


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
SOURCE_COLUMNS = ("brief_id", "exchange_id", "content_hash")
# Each turn by its id and content hash, with the brief claiming it: {} is one "(?, ?, ?)"
# a turn. A VALUES list's columns are column1, column2, ... on both backends.
CLAIM_TURNS = """
UPDATE exchanges SET brief_id = claimed.column3
FROM (VALUES {}) AS claimed
WHERE exchanges.id = claimed.column1 AND exchanges.content_hash = claimed.column2
  AND exchanges.session_id = ? AND exchanges.brief_id IS NULL"""
CLAIM_PAGE = 2_000  # turns claimed in one statement (three parameters each)
SELECT_BRIEF = """
SELECT b.id, s.name, b.tier, b.created_at, b.first_exchange_id, b.last_exchange_id, b.turns,
       b.body, (SELECT group_concat(exchange_id) FROM brief_sources WHERE brief_id = b.id)
FROM briefs b JOIN sessions s ON s.id = b.session_id"""
SELECT_SESSION_BRIEFS = SELECT_BRIEF + " WHERE b.session_id = ? ORDER BY b.id DESC LIMIT ?"


def claim_brief(conn: Conn, draft: BriefDraft) -> int:
    """Write a brief and mark its source turns compressed, all or nothing (see
    ``claim_briefs``)."""
    return claim_briefs(conn, [draft])[0]


def claim_briefs(conn: Conn, drafts: Sequence[BriefDraft]) -> list[int]:
    """Write briefs, in order, and mark their source turns compressed, all or nothing;
    their ids, in the same order.

    Call inside a write transaction. Each turn is claimed only if it is still
    uncompressed and unchanged; if any is not, ``ClaimLost`` is raised and the caller's
    transaction rolls back, so no turn is ever in two briefs and no brief is partial.
    The briefs are inserted in one pipelined statement, their turns claimed a page of
    turns a statement and their sources written in one, whatever their number.
    """
    if not drafts:
        return []
    rows = [(d.session_id, d.tier, d.created_at, d.sources[0][0], d.sources[-1][0],
             len(d.sources), d.body) for d in drafts]
    if len(rows) == 1:  # one statement: sent with the write's BEGIN when it comes first
        brief_ids = [int(one(conn, INSERT_BRIEF, rows[0])[0])]
    else:
        brief_ids = [int(r[0]) for r in conn.executemany(INSERT_BRIEF, rows)]
    claims = [(d.session_id, (i, h, b)) for d, b in zip(drafts, brief_ids, strict=True)
              for i, h in d.sources]
    for start in range(0, len(claims), CLAIM_PAGE):
        page = claims[start:start + CLAIM_PAGE]
        for session_id in dict.fromkeys(s for s, _ in page):
            turns = [t for s, t in page if s == session_id]
            conn.execute(CLAIM_TURNS.format(", ".join(["(?, ?, ?)"] * len(turns))),
                         (*(v for turn in turns for v in turn), session_id))
            if conn.changes() != len(turns):
                raise ClaimLost(f"some of turns #{turns[0][0]}-#{turns[-1][0]} were "
                                "compressed by another writer")
    dialect(conn).insert_rows(conn, "brief_sources", SOURCE_COLUMNS,
                              [(b, i, h) for _, (i, h, b) in claims])
    return brief_ids


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
