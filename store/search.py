"""Keyword search over the FTS5 index: query quoting, SQL building, running.

The index (migration 2) has four columns: ``body`` (the turn's words), ``context`` (words
of the turns just before it in its session), ``dated`` (month and year) and ``scope``
(a session token, see ``store.exchanges.scope_token``). BM25 weighs a match in the
context below one in the turn itself; scope never scores.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import apsw

from store.exchanges import scope_token, turn_trace_sql
from store.sql import Conn, all_rows, id_list, is_postgres, where

__all__ = [
    "ANY_FLAG",
    "BM25_WEIGHTS",
    "LENGTH_PRIOR",
    "FtsSyntaxError",
    "HitFilter",
    "check_expression",
    "dated_terms",
    "flag_condition",
    "fts_phrase",
    "ids_matching",
    "keyword_hits",
    "keyword_sql",
    "match_expression",
    "syntax_notes",
]

# bm25() column weights: body, context, dated, scope. The context column holds a few
# dozen words of the turns before it: a match there counts half as much as one in the
# turn. Measured on LoCoMo-format conversations (bench/locomo.py): without the column
# recall@10 falls from 0.80 to 0.70; weights 0.4-0.6 are within a point of 0.5.
BM25_WEIGHTS = (1.0, 0.5, 1.0, 0.0)
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")

# FTS5's BM25 normalises length with a fixed b = 0.75, which over-penalises long turns
# (in conversations the long turns carry the facts; pivoted length normalisation makes
# the same observation on document collections). Scores are multiplied by
# length ** LENGTH_PRIOR (bytes), over the best POOL x limit BM25 hits. Measured on
# LoCoMo-format conversations: 0.15-0.25 help alike; 0.2 gives +4 points of recall@5
# and +1.5 of recall@10.
LENGTH_PRIOR = 0.2
POOL = 2

CHECK_EXPRESSION = "SELECT 1 FROM exchanges_fts WHERE exchanges_fts MATCH ? AND rowid = 0"


def _live_sql(session_param: str) -> str:
    """The ids of a session's live (uncompressed) turns.

    Within a session, the compressed turns are all but these few (at most a batch or
    so): one small list read from the partial index ``exchanges_live`` replaces a lookup
    of every candidate's row to test ``brief_id IS NOT NULL``.
    """
    return ("SELECT l.id FROM exchanges l"
            f" WHERE l.session_id = {session_param} AND l.brief_id IS NULL")


class FtsSyntaxError(ValueError):
    """The MATCH expression is not valid FTS5 syntax."""


@dataclass(frozen=True)
class HitFilter:
    session_id: int | None = None  # None: every session
    role: str | None = None
    since: float | None = None
    until: float | None = None
    compressed_only: bool = False
    trace_id: str | None = None
    flag: str | None = None  # a NAFE signature, or "NAFE" for any (store.signal_flags)

    @property
    def reads_rows(self) -> bool:
        """Whether a turn's own row must be read to test it: a role, a time range, a
        trace id or a flag (a session and compressed turns have cheaper tests)."""
        return (self.role is not None or self.since is not None or self.until is not None
                or self.trace_id is not None or self.flag is not None)


ANY_FLAG = "NAFE"


def flag_condition(flt: HitFilter, id_column: str, params: list[object],
                   numbered: int | None) -> str:
    """An EXISTS over the turn's flags; ``numbered``: offset of ?N parameters, else ?."""
    sql = f"EXISTS (SELECT 1 FROM signal_flags g WHERE g.exchange_id = {id_column}"
    if flt.flag != ANY_FLAG:
        params.append(flt.flag)
        sql += f" AND g.signature = ?{len(params) + numbered}" if numbered is not None \
            else " AND g.signature = ?"
    return sql + ")"


def fts_phrase(text: str) -> str:
    """Quote any text as one FTS5 string (the one quoting helper for FTS queries)."""
    return '"' + text.replace('"', '""') + '"'


def dated_terms(seconds: float) -> str:
    """What the ``dated`` column holds for a turn: its UTC month and year, "May 2023"."""
    moment = time.gmtime(seconds)
    return f"{_MONTHS[moment.tm_mon - 1]} {moment.tm_year}"


def _syntax_error(ex: apsw.SQLError) -> bool:
    message = str(ex)
    return any(part in message for part in (  # what FTS5 says about a bad MATCH expression
        "fts5", "syntax", "no such column", "unterminated string",
        "unknown special query", "expected integer"))


def check_expression(conn: Conn, expression: str) -> None:
    """Raise ``FtsSyntaxError`` unless ``expression`` parses on its own.

    A caller's expression is checked alone before it is combined with the session
    scope: ``x) OR (secret`` is invalid alone, but inside ``scope:s1 AND (...)`` it would
    parse as ``(scope:s1 AND (x)) OR (secret)`` and reach other sessions.
    On PostgreSQL the expression is parsed here, as FTS5 would (no statement runs).
    """
    if is_postgres(conn):
        from store.postgres.tsquery import translate

        translate(expression)
        return
    try:
        all_rows(conn, CHECK_EXPRESSION, (expression,))
    except apsw.SQLError as ex:
        if _syntax_error(ex):
            raise FtsSyntaxError(str(ex)) from None
        raise


def match_expression(expression: str, flt: HitFilter, *, own_words: bool = False) -> str:
    """The MATCH string: the expression, in the turn's own words only if asked, in scope."""
    match = f"{{body}} : ({expression})" if own_words else expression
    if flt.session_id is not None:
        # The scope first: FTS5 then walks the session's rows and seeks in the terms'
        # doclists (~25% faster at 20,000 turns than the other order).
        match = f"scope:{scope_token(flt.session_id)} AND ({match})"
    return match


def keyword_sql(flt: HitFilter) -> tuple[str, list[object]]:
    """SQL and the filter's parameters for ranked keyword hits (MATCH and LIMIT go first/last).

    The inner query ranks by BM25 (the filters joined in, except compressed turns of one
    session: its live turns left out); the outer one multiplies the best ``POOL`` times
    LIMIT by the length prior and keeps LIMIT.
    """
    clauses = ["exchanges_fts MATCH ?1"]
    params: list[object] = []
    join = ""
    compressed_only = flt.compressed_only
    if compressed_only and flt.session_id is not None:
        params.append(flt.session_id)
        clauses.append(f"exchanges_fts.rowid NOT IN ({_live_sql(f'?{len(params) + 2}')})")
        compressed_only = False
    if flt.reads_rows or compressed_only:
        join = " JOIN exchanges f ON f.id = exchanges_fts.rowid"
        if flt.role is not None:
            params.append(flt.role)
            clauses.append(f"f.role = ?{len(params) + 2}")
        if flt.since is not None:
            params.append(flt.since)
            clauses.append(f"f.created_at >= ?{len(params) + 2}")
        if flt.until is not None:
            params.append(flt.until)
            clauses.append(f"f.created_at < ?{len(params) + 2}")
        if compressed_only:
            clauses.append("f.brief_id IS NOT NULL")
        if flt.trace_id is not None:
            params.append(flt.trace_id)
            clauses.append(f"{turn_trace_sql('f')} = ?{len(params) + 2}")
        if flt.flag is not None:
            clauses.append(flag_condition(flt, "f.id", params, 2))
    weights = ", ".join(str(w) for w in BM25_WEIGHTS)
    inner = (
        f"SELECT exchanges_fts.rowid AS id, bm25(exchanges_fts, {weights}) AS raw"
        " FROM exchanges_fts" + join + " WHERE " + " AND ".join(clauses)
        + f" ORDER BY raw LIMIT ?2 * {POOL}"
    )
    sql = (
        f"SELECT h.id, -h.raw * pow(max(octet_length(e.content), 1), {LENGTH_PRIOR}) AS score"
        f" FROM ({inner}) h JOIN exchanges e ON e.id = h.id ORDER BY score DESC, h.id LIMIT ?2"
    )
    return sql, params


def keyword_hits(
    conn: Conn, expression: str, flt: HitFilter, limit: int, *,
    caller_syntax: bool = False,
) -> list[tuple[int, float]]:
    """Best keyword matches as (exchange id, score), best first; higher score is better.

    ``caller_syntax``: the expression was written by the caller (phrases, prefixes, OR,
    NEAR): it is checked on its own first and matched against the turns' own words
    only (not the neighbouring-turn context or the date). Raises ``FtsSyntaxError``
    when ``expression`` is not valid FTS5. On PostgreSQL: ``store.postgres.search``.
    """
    if is_postgres(conn):
        from store.postgres import search as pg_search

        return pg_search.keyword_hits(conn, expression, flt, limit, own_words=caller_syntax)
    if caller_syntax:
        check_expression(conn, expression)
    match = match_expression(expression, flt, own_words=caller_syntax)
    sql, params = keyword_sql(flt)
    try:
        rows = all_rows(conn, sql, (match, limit, *params))
    except apsw.SQLError as ex:
        if _syntax_error(ex):
            raise FtsSyntaxError(str(ex)) from None
        raise
    return [(int(r[0]), float(r[1])) for r in rows]


def syntax_notes(conn: Conn, expression: str, *, caller_syntax: bool = False) -> list[str]:
    """What the backend matches differently from FTS5 in a valid ``expression`` (on
    PostgreSQL: ``^``, long NEAR groups; nothing on SQLite)."""
    if not is_postgres(conn):
        return []
    from store.postgres.search import query_notes

    return query_notes(expression, own_words=caller_syntax)


def ids_matching(
    conn: Conn, ids: Sequence[int], flt: HitFilter, *, in_session: bool = False
) -> set[int]:
    """Which of ``ids`` pass the filter (used for vector hits). With a session and no
    other filter than compressed turns, only the index by session is read.

    ``in_session``: the ids are known to be turns of the filter's session (a KNN within
    it, a turn's next one); without a filter other than compressed turns, only the
    session's few live turns are read then, not the ids' rows.
    """
    if not ids:
        return set()
    if in_session and flt.session_id is not None and not flt.reads_rows:
        if not flt.compressed_only:
            return set(ids)
        live = {int(r[0]) for r in all_rows(conn, _live_sql("?"), (flt.session_id,))}
        return set(ids) - live
    in_ids, params = id_list("id", ids)
    scoped = flt.compressed_only and flt.session_id is not None
    clauses, values = where(
        ("session_id = ?", flt.session_id), ("role = ?", flt.role),
        ("created_at >= ?", flt.since), ("created_at < ?", flt.until),
        (f"id NOT IN ({_live_sql('?')})", flt.session_id if scoped else None),
        ("brief_id IS NOT NULL", flt.compressed_only and not scoped),
        (turn_trace_sql("exchanges") + " = ?", flt.trace_id))
    params += values
    if flt.flag is not None:
        clauses.append(flag_condition(flt, "exchanges.id", params, None))
    sql = "SELECT id FROM exchanges WHERE " + " AND ".join([in_ids, *clauses])
    return {int(r[0]) for r in all_rows(conn, sql, params)}
