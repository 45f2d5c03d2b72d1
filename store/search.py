"""Keyword search over the FTS5 index: query quoting, SQL building, running."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import apsw

from store.exchanges import scope_token
from store.sql import all_rows

__all__ = [
    "FtsSyntaxError",
    "HitFilter",
    "fts_phrase",
    "ids_matching",
    "keyword_hits",
    "keyword_sql",
]


class FtsSyntaxError(ValueError):
    """The MATCH expression is not valid FTS5 syntax."""


@dataclass(frozen=True)
class HitFilter:
    session_id: int | None = None  # None: every session
    role: str | None = None
    since: float | None = None
    until: float | None = None
    compressed_only: bool = False


def fts_phrase(text: str) -> str:
    """Quote any text as one FTS5 string (the one quoting helper for FTS queries)."""
    return '"' + text.replace('"', '""') + '"'


def keyword_sql(flt: HitFilter) -> tuple[str, list[object]]:
    """SQL and the filter's parameters for ranked keyword hits (MATCH and LIMIT go first/last)."""
    where = ["exchanges_fts MATCH ?1"]
    params: list[object] = []
    join = ""
    if flt.role is not None or flt.since is not None or flt.until is not None or (
        flt.compressed_only
    ):
        join = " JOIN exchanges e ON e.id = exchanges_fts.rowid"
        if flt.role is not None:
            params.append(flt.role)
            where.append(f"e.role = ?{len(params) + 2}")
        if flt.since is not None:
            params.append(flt.since)
            where.append(f"e.created_at >= ?{len(params) + 2}")
        if flt.until is not None:
            params.append(flt.until)
            where.append(f"e.created_at < ?{len(params) + 2}")
        if flt.compressed_only:
            where.append("e.brief_id IS NOT NULL")
    sql = (
        "SELECT exchanges_fts.rowid, bm25(exchanges_fts, 1.0, 0.0) AS score FROM exchanges_fts"
        + join
        + " WHERE "
        + " AND ".join(where)
        + " ORDER BY score LIMIT ?2"
    )
    return sql, params


def keyword_hits(
    conn: apsw.Connection, expression: str, flt: HitFilter, limit: int
) -> list[tuple[int, float]]:
    """Best keyword matches as (exchange id, score), best first; higher score is better.

    Raises ``FtsSyntaxError`` when ``expression`` is not valid FTS5.
    """
    match = expression
    if flt.session_id is not None:
        match = f"({expression}) AND scope:{scope_token(flt.session_id)}"
    sql, params = keyword_sql(flt)
    try:
        rows = all_rows(conn, sql, (match, limit, *params))
    except apsw.SQLError as ex:
        message = str(ex)
        if "fts5" in message or "syntax" in message or "no such column" in message:
            raise FtsSyntaxError(message) from None
        raise
    return [(int(r[0]), -float(r[1])) for r in rows]


def ids_matching(
    conn: apsw.Connection, ids: Sequence[int], flt: HitFilter
) -> set[int]:
    """Which of ``ids`` pass the filter (used for vector hits)."""
    if not ids:
        return set()
    where = [f"id IN ({','.join('?' * len(ids))})"]
    params: list[object] = list(ids)
    if flt.session_id is not None:
        where.append("session_id = ?")
        params.append(flt.session_id)
    if flt.role is not None:
        where.append("role = ?")
        params.append(flt.role)
    if flt.since is not None:
        where.append("created_at >= ?")
        params.append(flt.since)
    if flt.until is not None:
        where.append("created_at < ?")
        params.append(flt.until)
    if flt.compressed_only:
        where.append("brief_id IS NOT NULL")
    sql = "SELECT id FROM exchanges WHERE " + " AND ".join(where)
    return {int(r[0]) for r in all_rows(conn, sql, params)}
