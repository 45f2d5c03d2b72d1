"""Keyword search and the filter of hits, on the store's dialect.

Queries are FTS5 expressions on both backends: SQLite's FTS5 index runs them
(``store.sqlite.search``), PostgreSQL translates them to tsqueries
(``store.postgres.search``); ``store.dialect`` picks the one of the connection. The
keyword index holds, per turn, its own words, the words of the turns just before it in
its session (ranked below its own) and its month and year (``dated_terms``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from store.correlation import turn_trace_sql
from store.dialect import dialect
from store.keyword_syntax import plain_phrases
from store.search_filter import FtsSyntaxError, HitFilter, flag_condition, live_sql
from store.sql import Conn, all_rows, id_list, where

if TYPE_CHECKING:
    from store.keyword_index import KeywordIndex

__all__ = [
    "FtsSyntaxError",
    "HitFilter",
    "ids_matching",
    "keyword_hits",
    "syntax_notes",
]

def keyword_hits(
    conn: Conn, expression: str, flt: HitFilter, limit: int, *,
    caller_syntax: bool = False, derived: KeywordIndex | None = None,
) -> list[tuple[int, float]]:
    """Best keyword matches as (exchange id, score), best first; higher score is better.

    ``caller_syntax``: the expression was written by the caller (phrases, prefixes, OR,
    NEAR): it is checked on its own first and matched against the turns' own words
    only (not the neighbouring-turn context or the date). Raises ``FtsSyntaxError``
    when ``expression`` is not valid FTS5.

    ``derived``: the derived keyword index (``Backend.keyword_index``). It answers a plain
    words query (``plain_phrases``) and a caller's expression that it reads as FTS5 does
    (prefixes, NEAR, phrases, AND, OR: ``KeywordIndex.syntax``), in one session or the
    whole store, also of compressed turns in a session, when it is trusted and large
    enough to be faster (``KeywordIndex.answers_from``); a session's plain query goes to
    FTS5 even then when the index can give its words' counts
    (``KeywordIndex.counted_hits``); anything else is FTS5's, with the same hits.
    """
    if derived is not None:
        hits = _derived_hits(conn, derived, expression, flt, limit, caller_syntax)
        if hits is not None:
            return hits
    return dialect(conn).keyword_hits(conn, expression, flt, limit, caller_syntax=caller_syntax)


def _derived_hits(conn: Conn, derived: KeywordIndex, expression: str, flt: HitFilter,
                  limit: int, caller_syntax: bool) -> list[tuple[int, float]] | None:
    if flt.reads_rows or (flt.compressed_only and flt.session_id is None):
        return None
    if not derived.answers() or not derived.trusted(conn):
        return None
    syntax = derived.syntax(expression) if caller_syntax else None
    phrases = None if caller_syntax else plain_phrases(expression)
    if syntax is None and phrases is None:
        return None
    if syntax is None and flt.session_id is not None:
        # A session's matches are few: FTS5 ranks them in C faster than the index's
        # candidates are read and scored here, once it need not count the phrases.
        assert phrases is not None
        hits = derived.counted_hits(conn, expression, phrases, flt, limit)
        if hits is not None:
            return hits
    exclude = None
    if flt.compressed_only:  # a session's live turns are a few: leave them out
        exclude = {int(r[0]) for r in all_rows(conn, live_sql("?"), (flt.session_id,))}
    if syntax is not None:
        return derived.search_syntax(conn, syntax, flt.session_id, limit, exclude)
    assert phrases is not None
    return derived.search(conn, phrases, flt.session_id, limit, exclude)


def syntax_notes(conn: Conn, expression: str, *, caller_syntax: bool = False) -> list[str]:
    """What the backend matches differently from FTS5 in a valid ``expression`` (on
    PostgreSQL: ``^``, long NEAR groups; nothing on SQLite)."""
    return dialect(conn).syntax_notes(expression, caller_syntax=caller_syntax)


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
        live = {int(r[0]) for r in all_rows(conn, live_sql("?"), (flt.session_id,))}
        return set(ids) - live
    in_ids, params = id_list("id", ids)
    scoped = flt.compressed_only and flt.session_id is not None
    clauses, values = where(
        ("session_id = ?", flt.session_id), ("role = ?", flt.role),
        ("created_at >= ?", flt.since), ("created_at < ?", flt.until),
        (f"id NOT IN ({live_sql('?')})", flt.session_id if scoped else None),
        ("brief_id IS NOT NULL", flt.compressed_only and not scoped),
        (turn_trace_sql("exchanges") + " = ?", flt.trace_id))
    params += values
    if flt.flag is not None:
        clauses.append(flag_condition(flt, "exchanges.id", params, None))
    sql = "SELECT id FROM exchanges WHERE " + " AND ".join([in_ids, *clauses])
    return {int(r[0]) for r in all_rows(conn, sql, params)}
