"""Keyword search on SQLite: the FTS5 index, its MATCH strings, BM25 ranking.

The index (migration 2) has four columns: ``body`` (the turn's words), ``context`` (words
of the turns just before it in its session), ``dated`` (month and year) and ``scope``
(a session token, ``scope_token``). BM25 weighs a match in the context below one in
the turn itself (``store.search_filter.BM25_WEIGHTS``); scope never scores.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from operator import itemgetter

import apsw

from store.correlation import turn_trace_sql
from store.keyword_syntax import fts_phrase, plain_phrases
from store.search_filter import (
    BM25_K1,
    BM25_WEIGHTS,
    POOL,
    FtsSyntaxError,
    HitFilter,
    flag_condition,
    fts5_idf,
    live_sql,
)
from store.sql import Conn, Row, Transactions, all_rows, first
from store.sqlite import bm25_top_path
from store.sqlite.doc_freq import Kept, counts_arg, rows_holding, snapshot

__all__ = ["LENGTH_PRIOR", "best_first", "check_expression", "common_left", "keep_merged",
           "kept_hits", "keyword_hits", "keyword_sql", "length_factor", "match_expression",
           "merge_small", "merge_state", "ranked", "scope_token"]

# FTS5's BM25 normalises length with a fixed b = 0.75, which over-penalises long turns
# (in conversations the long turns carry the facts; pivoted length normalisation makes
# the same observation on document collections). Scores are multiplied by
# length ** LENGTH_PRIOR (bytes), over the best POOL x limit BM25 hits. Measured on
# LoCoMo-format conversations: 0.15-0.25 help alike; 0.2 gives +4 points of recall@5
# and +1.5 of recall@10.
LENGTH_PRIOR = 0.2
# one statement text for any number of ids (a list of marks would be a statement a size)
LENGTHS = ("SELECT id, octet_length(content) FROM exchanges"
           " WHERE id IN (SELECT value FROM json_each(?))")
MAX_LENGTHS = 1 << 17  # turns' lengths a connection keeps (more: all are dropped)
UNSCORED = -2  # bm25_top's count of a phrase that selects rows and adds nothing
# A computed BM25 sum may exceed its exact value by a few units in the last place; a
# ceiling is compared with this much room.
_ROUNDING = 1e-9

CHECK_EXPRESSION = "SELECT 1 FROM exchanges_fts WHERE exchanges_fts MATCH ? AND rowid = 0"


# FTS5 writes each transaction's rows as a new segment and merges segments of a level
# four at a time (its automerge), so the index holds several segments (8 at 20,000
# turns ingested one at a time), and a query looks up each of its words, and bm25()
# counts each over the whole index, in every one of them. Merged into one segment, a
# session-scoped search took about a quarter less CPU at 20,000 turns (2.4 -> 1.9 ms; the
# guard's 3.3 -> 2.3 ms), with the same hits and scores. ``keep_merged`` merges them all
# again once the store has grown by MERGE_GROWTH since the last time (each turn's entry
# is then rewritten a few times in all, as by a tiered merge), in steps of MERGE_PAGES
# pages, each its own short write, so that ingests interleave.
#
# Between two such merges every committed turn adds a segment again, and FTS5's
# automerge leaves up to three of each size: 15 segments 1,000 turns after a merge at
# 20,000 turns, where a session search's statement took 27% more instructions than
# merged. ``merge_small`` merges those among themselves (every size holding two or
# more, FTS5's 'merge' with 'usermerge' 2) and leaves the large segment as it is: three
# segments then (+14%), for 8 ms of CPU. The upkeep thread runs it once SMALL_TURNS
# turns were written since the last merge of either kind (both recorded in ``meta``, so
# that a new process, a hook's, does not write to find nothing to merge).
MERGE_GROWTH = 1.25
MERGE_PAGES = 64
MERGE_FROM = 1_000  # turns: a smaller index has few segments and costs little anyway
SMALL_TURNS = 100
MERGED_KEY = "fts_merged_at"  # meta: the largest turn id when the index was last merged
SMALL_KEY = "fts_small_merged_at"  # meta: the same, its small segments (either merge)
MERGE_STEP = "INSERT INTO exchanges_fts(exchanges_fts, rank) VALUES ('merge', ?)"
PAIRS = "INSERT INTO exchanges_fts(exchanges_fts, rank) VALUES ('usermerge', 2)"
MERGE_STATE = f"""
SELECT (SELECT coalesce(max(id), 0) FROM exchanges),
       (SELECT value FROM meta WHERE key = '{MERGED_KEY}'),
       (SELECT value FROM meta WHERE key = '{SMALL_KEY}')"""
SET_MERGED = "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)"


def merge_state(store: Transactions) -> tuple[int, int, int]:
    """The largest turn id; the one from which the next merge of every segment is due
    (MERGE_FROM, or MERGE_GROWTH times the largest id at the last one); the one from
    which a merge of the small segments is (SMALL_TURNS past the last merge of either
    kind)."""
    with store.read() as conn:
        row = first(conn, MERGE_STATE)
    largest, merged, small = (int(v or 0) for v in (row if row is not None else (0, 0, 0)))
    return (largest, max(MERGE_FROM, math.ceil(merged * MERGE_GROWTH)),
            max(MERGE_FROM, max(merged, small) + SMALL_TURNS))


def keep_merged(store: Transactions, stop: Callable[[], bool] = lambda: False) -> int:
    """Merge the FTS5 index's segments into one when the store grew by MERGE_GROWTH
    since they were last merged; how many steps it took (0: not due). Runs beside the
    searches (the store's upkeep thread, ``store.upkeep``): every step is a write of its
    own, and ``stop()`` ends it between two (the next call goes on where it stopped)."""
    largest, due, _ = merge_state(store)
    if largest < due:
        return 0
    # negative: every segment, whatever its level, merged into one
    return _merged(store, stop, -MERGE_PAGES, MERGED_KEY, largest)


def merge_small(store: Transactions, stop: Callable[[], bool] = lambda: False) -> int:
    """Merge the FTS5 index's segments of each size that holds two or more into one of
    the next size, until no size does (each step its own short write, as in
    ``keep_merged``), when SMALL_TURNS turns were written since the last merge; how many
    steps it took (0: not due)."""
    largest, _, due = merge_state(store)
    if largest < due:
        return 0
    return _merged(store, stop, MERGE_PAGES, SMALL_KEY, largest, first=PAIRS)


def _merged(store: Transactions, stop: Callable[[], bool], pages: int, key: str,
            largest: int, *, first: str | None = None) -> int:
    """FTS5's 'merge' of ``|pages|`` a step, each step a write of its own, until nothing
    is left to merge (then ``key`` records ``largest`` in ``meta``) or ``stop()``; how
    many steps it took. ``first``: a statement run before the first step (a setting
    FTS5 keeps in the index's configuration).

    ``pages`` negative: the first step starts a merge of every segment into one, and the
    next steps go on with that merge (a positive count: a merge already started, or a
    level holding ``usermerge`` segments). A negative count at every step would start the
    merge of every segment over whenever another write had added one since the last
    step, the partial output among its inputs: while turns are ingested (a commit adds a
    segment) it never ended, and the index grew by each step's pages instead."""
    steps = 0
    while not stop():
        with store.write() as conn:
            assert isinstance(conn, apsw.Connection)
            if first is not None and not steps:
                conn.execute(first)
            before = conn.total_changes()
            conn.execute(MERGE_STEP, (pages if not steps else abs(pages),))
            steps += 1
            if conn.total_changes() - before < 2:  # nothing left to merge (FTS5's test)
                conn.execute(SET_MERGED, (key, str(largest)))
                return steps
    return steps


def scope_token(session_id: int) -> str:
    """The FTS token that marks a turn's session (see migration 1)."""
    return f"s{session_id}"


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
    """
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


def keyword_sql(flt: HitFilter, *, counts: bool = False) -> tuple[str, list[object]]:
    """SQL and the filter's parameters for the best ``POOL`` times LIMIT keyword hits by
    BM25 as (id, bm25 value), best first (MATCH and LIMIT go first, then the filter's;
    with ``counts``, the phrases' counts last, see ``store.sqlite.doc_freq``: the caller
    appends them, or None). ``bm25_top`` is FTS5's bm25() of the rows that can be among
    the best; the filters are joined in, except compressed turns of one session: its
    live turns are left out. ``ranked`` then applies the length prior.
    """
    clauses = ["exchanges_fts MATCH ?1"]
    params: list[object] = []
    join = ""
    compressed_only = flt.compressed_only
    if compressed_only and flt.session_id is not None:
        params.append(flt.session_id)
        clauses.append(f"exchanges_fts.rowid NOT IN ({live_sql(f'?{len(params) + 2}')})")
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
    # bm25_top (store/sqlite/bm25_top.c, loaded by store.db): bm25()'s value for the rows
    # that can be among the best ?2 * POOL, without reading the size of those that cannot
    # (the same rows and values here; a store-wide search ~30% less CPU at 20,000 turns).
    # Where the install could not build it, FTS5's own bm25().
    # With ``counts``, the phrases' document frequencies are handed to it as its last
    # argument instead of being counted over the whole index by every statement.
    given = f", ?{len(params) + 3}" if counts and bm25_top_path() else ""
    rank = (f"bm25_top(exchanges_fts, ?2 * {POOL}, {weights}{given})" if bm25_top_path()
            else f"bm25(exchanges_fts, {weights})")
    sql = (
        f"SELECT exchanges_fts.rowid AS id, {rank} AS raw"
        " FROM exchanges_fts" + join + " WHERE " + " AND ".join(clauses)
        + f" ORDER BY raw LIMIT ?2 * {POOL}"
    )
    return sql, params


def common_left(phrases: list[str], counts: list[int], rows: int, k: int
                ) -> tuple[str, list[int], float] | None:
    """A MATCH of ``phrases`` (plain words OR-ed, each held by ``counts`` of the table's
    ``rows`` rows) that leaves out the rows holding only the commonest of them, with
    its counts argument and the highest score such a row can reach: None when leaving
    none out looks better.

    This is MaxScore (Turtle and Flood, 1995) over FTS5's statement. A phrase adds at
    most its IDF times (k1 + 1) to a row's BM25 score, however often the row holds it,
    and a row that holds a phrase once, at the average length, in a column of weight 1,
    gets its IDF times (k1 + 1) / (1 + k1): its IDF. So the k-th best score is about
    the IDF of the rarest phrases that k rows hold between them, or more
    (``_kth_floor``). The commonest phrases whose ceilings add up to less than that
    are matched only in rows that hold one of the others (``(common) AND (rarer)``,
    the rarer phrases repeated there with a count of -2: they select rows and score
    nothing, see bm25_top.c); each phrase is scored where it stands in ``phrases``, so
    every row's score is the same double. The split is made only when the rarer
    phrases hold at least 2 k rows (fewer, and the statement may return fewer than k:
    wasted) and at most half of the phrases' postings (measured at 21,000 turns: from
    about half on, the statement leaving the others out cost as much as the whole
    one). ``_rarer_first`` checks the result: the rule only chooses when to try."""
    if min(counts, default=-1) < 0:  # a phrase not counted
        return None
    idf = [fts5_idf(rows, n) for n in counts]
    order = sorted(range(len(phrases)), key=lambda i: (idf[i], i))  # commonest first
    common: set[int] = set()
    for at, i in enumerate(order[:-1]):
        rarer = order[at + 1:]
        if sum(counts[r] for r in rarer) < 2 * k:
            break
        if (BM25_K1 + 1.0) * (sum(idf[c] for c in common) + idf[i]) >= _kth_floor(
                rarer, idf, counts, k):
            break
        common.add(i)
    rare = [i for i in range(len(phrases)) if i not in common]
    if not common or 2 * sum(counts[i] for i in rare) > sum(counts):
        return None
    selects = " OR ".join(fts_phrase(phrases[i]) for i in rare)
    parts: list[str] = []
    given: list[int] = []
    group: list[int] = []
    for i in [*range(len(phrases)), None]:  # consecutive common phrases share one AND
        if i is not None and i in common:
            group.append(i)
            continue
        if group:
            parts.append("((" + " OR ".join(fts_phrase(phrases[g]) for g in group)
                         + f") AND ({selects}))")
            given += [counts[g] for g in group] + [UNSCORED] * len(rare)
            group = []
        if i is not None:
            parts.append(fts_phrase(phrases[i]))
            given.append(counts[i])
    return " OR ".join(parts), given, (BM25_K1 + 1.0) * sum(idf[c] for c in common)


def _kth_floor(rarer: list[int], idf: list[float], counts: list[int], k: int) -> float:
    """About the lowest score of the best ``k`` rows holding one of ``rarer`` (phrases
    by IDF ascending): the IDF of the rarest phrases that ``k`` rows hold between them
    (a row holding a phrase once, at the average length, scores its IDF)."""
    held = 0
    for i in reversed(rarer):
        held += counts[i]
        if held >= k:
            return idf[i]
    return 0.0


def _rarer_first(conn: apsw.Connection, kept: Kept, sql: str, params: list[object],
                 phrases: list[str], counts: list[int], limit: int) -> list[Row] | None:
    """``keyword_sql``'s best k rows (``POOL`` x ``limit``), read leaving out the rows
    that hold only the commonest phrases (``common_left``); None when that cannot be
    sure of them.

    The statement's k-th best score among the rows it reads is no higher than the
    k-th best of all rows (those it read are among them, scored the same). When it
    returned k rows and its k-th best is above the highest score a row left out can
    reach, no such row is among the best k: they are the whole statement's."""
    k = POOL * limit
    split = common_left(phrases, counts, kept.rows, k)
    if split is None:
        return None
    match, given, reach = split
    rows = all_rows(conn, sql, (match, limit, *params[:-1], counts_arg(kept, given)))
    if len(rows) == k and -float(rows[-1][1]) > reach * (1.0 + _ROUNDING):
        return rows
    return None


def ranked(conn: Conn, rows: list[Row], limit: int, lengths: dict[int, int]
           ) -> list[tuple[int, float]]:
    """The best ``limit`` of ``keyword_sql``'s rows by BM25 times the length prior, as
    (exchange id, score), ties by id; a row whose turn is not stored is left out.
    ``lengths`` holds turns' contents' lengths in bytes by id (a connection's, kept
    between its searches: ``store.sqlite.doc_freq.Kept``); the missing ones are read and
    added."""
    missing = [int(r[0]) for r in rows if r[0] not in lengths]
    if missing:
        lengths.update(conn.execute(LENGTHS, (json.dumps(missing),)))
    prior, pw = LENGTH_PRIOR, math.pow  # length_factor, inline: a call a row costs more
    return best_first([(i, -raw * pw(lengths[i] or 1, prior))
                       for i, raw in rows if i in lengths], limit)


def length_factor(length: int) -> float:
    """What a turn's BM25 score is multiplied by for its length in bytes (LENGTH_PRIOR;
    C's pow(), as SQLite's pow(); a length is never below 0)."""
    return math.pow(length or 1, LENGTH_PRIOR)


def best_first(scored: list[tuple[int, float]], limit: int) -> list[tuple[int, float]]:
    """The best ``limit`` of (exchange id, score), ties by id."""
    scored.sort(key=itemgetter(0))
    scored.sort(key=itemgetter(1), reverse=True)  # stable: equal scores stay by id
    return scored[:limit]


def keyword_hits(conn: Conn, expression: str, flt: HitFilter, limit: int, *,
                 caller_syntax: bool = False) -> list[tuple[int, float]]:
    """Best keyword matches as (exchange id, score), best first (see
    ``store.search.keyword_hits``)."""
    assert isinstance(conn, apsw.Connection)
    # None outside a read transaction: nothing is kept then
    return kept_hits(conn, snapshot(conn), expression, flt, limit,
                     caller_syntax=caller_syntax)


def kept_hits(conn: apsw.Connection, kept: Kept | None, expression: str, flt: HitFilter,
              limit: int, *, caller_syntax: bool = False) -> list[tuple[int, float]]:
    """``keyword_hits`` with what ``conn`` keeps (``store.sqlite.doc_freq.snapshot``, just
    brought to its snapshot; None: nothing is kept)."""
    if caller_syntax:
        check_expression(conn, expression)
    match = match_expression(expression, flt, own_words=caller_syntax)
    # the graph's own word queries are given their phrases' counts; FTS5 counts those of
    # a caller's expression (column filters, prefixes, NEAR) itself
    phrases = None if caller_syntax or not bm25_top_path() else plain_phrases(expression)
    sql, params = keyword_sql(flt, counts=phrases is not None)
    rows: list[Row] | None = None
    if phrases is not None:
        scope: list[str | None] = [] if flt.session_id is None else [None]
        if kept is None:
            params.append(b"")  # none given
        else:
            counts = rows_holding(conn, kept, [*scope, *phrases])
            params.append(counts_arg(kept, counts))
            if not scope:  # store-wide
                rows = _rarer_first(conn, kept, sql, params, phrases, counts, limit)
    if rows is None:
        try:
            rows = all_rows(conn, sql, (match, limit, *params))
        except apsw.SQLError as ex:
            if _syntax_error(ex):
                raise FtsSyntaxError(str(ex)) from None
            raise
    lengths: dict[int, int] = {}
    if kept is not None:
        if len(kept.lengths) > MAX_LENGTHS:
            kept.lengths.clear()
        lengths = kept.lengths
    return ranked(conn, rows, limit, lengths)
