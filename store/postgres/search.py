"""Keyword search on PostgreSQL: the FTS5 expression as a tsquery over ``exchanges_fts``.

``store.postgres.dialect`` runs it for ``store.search``; the expression is translated
by ``store.postgres.tsquery``. Ranking mirrors the SQLite path's BM25:

* each phrase of the query counts ``ts_rank`` of the turn for that phrase alone, with
  the weights of ``store.search_filter.BM25_WEIGHTS`` (body 1.0, context 0.5, dated 1.0),
  times the phrase's inverse document frequency over the whole table, computed as
  FTS5's bm25() does (``ln((N - n + 0.5) / (n + 0.5))``, at least 1e-6). ``ts_rank``
  alone has no IDF: a question's common words then rank as high as its rare ones
  (LoCoMo dev split, hybrid search: recall@10 0.72 without IDF, 0.79 with it);
* length: ``ts_rank`` is divided by 1 + log(the turn's length in words)
  (normalisation 1); then, as on SQLite, the best POOL x LIMIT matches are multiplied
  by the turn's length in bytes to the power LENGTH_PRIOR. Measured on the LoCoMo dev
  split (recall@5 / @10): no length term 0.716 / 0.790; normalisation 1 0.721 / 0.793,
  with a prior of 0.05, 0.1, 0.2: 0.716 / 0.793, 0.714 / 0.790, 0.713 / 0.768; other
  normalisations (2, 8, 16) and ``ts_rank_cd`` were no better. SQLite: 0.730 / 0.802.
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol, cast

from store.correlation import turn_trace_sql
from store.postgres.keywords import DEPTH, DerivedKeywords, unit_terms
from store.postgres.tsquery import Tsquery, translate
from store.search_filter import (
    BM25_WEIGHTS,
    MIN_IDF,
    POOL,
    HitFilter,
    flag_condition,
    fts5_idf,
)
from store.sql import Conn, all_rows, one, where

__all__ = ["LENGTH_PRIOR", "RANK_NORMALIZATION", "RANK_WEIGHTS", "keyword_hits", "keyword_sql",
           "query_notes", "ranked_hits"]

# ts_rank's weights are given as {D, C, B, A}: D is not used (every position has a
# weight), C is the context, B the date, A the turn's own words.
RANK_WEIGHTS = f"{{0, {BM25_WEIGHTS[1]}, {BM25_WEIGHTS[2]}, {BM25_WEIGHTS[0]}}}"
LENGTH_PRIOR = 0.0
RANK_NORMALIZATION = 1

# Each phrase's IDF comes in with its text (``phrase_idfs``). N (turns) is the sum of
# the sessions' turn counters (ingest adds, forget subtracts): counting the index would
# read all of it; n (turns holding the phrase) is counted through the GIN index, over
# the whole table as bm25() counts it, up to N / 2 + 1 only (from there on the IDF is
# the minimum anyway) and up to COUNT_BOUND only: a phrase held by more turns than that
# (a prefix, a NEAR group of common words: a count would read hundreds of thousands of
# index entries and recheck as many turns, seconds at 1,000,000 turns) is counted in a
# sample of about SAMPLE_TURNS turns instead (``SAMPLED``: whole pages of the table, the
# same pages while it is unchanged), its share of the sample standing for its share
# of the store, at least COUNT_BOUND. Such a phrase is in 0.5% of the turns or more
# (5,000 of 1,000,000): the sample holds 25 of them or more, and its error moves the
# IDF by the log of the error's ratio. The planner's estimate from the column's
# statistics was tried for the count first: it ignores a phrase's weights (the turn's
# own words) and order (NEAR), and was off by up to twice the count. It only decides
# which phrases go to the sample without a count (``ESTIMATE``, at least COUNT_BOUND):
# the GIN index builds the whole bitmap of a phrase's words before the first row of a
# count comes, 0.2-0.6 s for a common word at 600,000 turns, however small the LIMIT.
# A word that ANALYZE's sample found in DF_CACHE_MIN turns or more (the column's most
# common elements, ``pg_stats``) is not counted: the share of the sampled turns holding
# it stands for the count, as a kept share does below. Without statistics (a new store)
# or for rarer words, the count.
TURNS = "SELECT coalesce(sum(turns), 0) FROM sessions"
HOLDING = """
WITH common AS MATERIALIZED (
  SELECT x.e, x.f FROM pg_stats s,
    unnest(s.most_common_elems::text::text[], s.most_common_elem_freqs) AS x(e, f)
  WHERE s.schemaname = current_schema() AND s.tablename = 'exchanges_fts'
    AND s.attname = 'doc' AND x.e IS NOT NULL)
SELECT v.t, coalesce(
  (SELECT round(m.f * ?2) FROM common m
   WHERE m.f * ?2 >= ?3 AND quote_literal(m.e) = to_tsquery('english', v.t)::text),
  (SELECT count(*) FROM (
     SELECT FROM exchanges_fts WHERE doc @@ to_tsquery('english', v.t) LIMIT v.n) AS m))
FROM unnest(?1::text[], ?4::int[]) AS v(t, n)"""
COUNT_BOUND = 5_000
SAMPLE_TURNS = 5_000
# A word or words with no column, prefix or order: a common one is in the statistics
# (HOLDING), a rarer one's bitmap is small; only the others are estimated first.
_PLAIN = re.compile(r"^'(?:[^']|'')*'$")
ESTIMATE = "EXPLAIN (FORMAT JSON) SELECT FROM exchanges_fts WHERE doc @@ to_tsquery('english', ?)"
SAMPLED = """
WITH s AS MATERIALIZED (
  SELECT doc FROM exchanges_fts TABLESAMPLE SYSTEM (?1) REPEATABLE (7))
SELECT v.t, (SELECT count(*) FROM s WHERE s.doc @@ to_tsquery('english', v.t)),
       (SELECT count(*) FROM s)
FROM unnest(?2::text[]) AS v(t)"""
# The derived index's candidates and the turns past its watermark (the primary key's
# index: a few rows each, never the GIN index's matches of a common word).
PICKED = """
SELECT rowid, session_id, doc, true AS held FROM exchanges_fts WHERE rowid = ANY(?::bigint[])
UNION ALL SELECT rowid, session_id, doc, false FROM exchanges_fts WHERE rowid > ?"""
# Candidates of a query whose shape leaves out word order (``_from_candidates``): read
# DEEPER times more each round, at most MAX_CANDIDATES (then PostgreSQL ranks every
# match). Reading only as many as the first round's share of matches says are needed
# (1.25 x) was tried: at 1,000,000 turns the NEAR groups' top-100 overlap fell from
# 1.000 to 0.96 (one query 0.69): their matches all hold the same words, and Tantivy's
# order of them is further from PostgreSQL's than a question's is.
DEEPER = 4
MAX_CANDIDATES = 12_800
UNITS = """
SELECT to_tsquery('english', v.t) AS q, v.idf FROM unnest(?::text[], ?::float8[]) AS v(t, idf)"""

# A common word's count reads up to N / 2 index entries: at 1,000,000 turns, seconds per
# word, on every request. Counts of at least DF_CACHE_MIN turns are kept per database,
# as a share of N, and reused while N stays within DF_DRIFT of the N they were counted
# at (the share of turns holding a word barely moves as a store grows); smaller counts
# are cheap and always taken fresh, so small stores rank exactly as before.
DF_CACHE_MIN = 2_000
DF_DRIFT = 0.05
DF_CACHE_SIZE = 20_000
_shares: OrderedDict[tuple[str, str], tuple[float, int]] = OrderedDict()
_shares_lock = threading.Lock()


class _Located(Conn, Protocol):
    keywords: DerivedKeywords | None  # as ``PgConnection.keywords``

    @property
    def database(self) -> str: ...  # as ``PgConnection.database``


def phrase_idfs(conn: Conn, units: Sequence[str]) -> list[float]:
    """Each phrase's IDF, as FTS5's bm25() computes it: ``ln((N - n + 0.5) / (n + 0.5))``,
    at least MIN_IDF."""
    total = int(one(conn, TURNS)[0])
    database = cast(_Located, conn).database
    having: dict[str, float] = {}
    with _shares_lock:
        for unit in units:
            kept = _shares.get((database, unit))
            if kept is not None and abs(total - kept[1]) <= DF_DRIFT * kept[1]:
                having[unit] = kept[0] * total
                _shares.move_to_end((database, unit))
    missing = [u for u in units if u not in having]
    if missing:
        bound = min(total // 2 + 1, COUNT_BOUND)
        sampled = bound <= total // 2  # else every count is exact
        common = {u for u in missing if sampled and not _PLAIN.match(u)
                  and _estimated(conn, u) >= bound}
        limits = [0 if u in common else bound for u in missing]
        counted = [(str(unit), int(n)) for unit, n in
                   all_rows(conn, HOLDING, (missing, total, DF_CACHE_MIN, limits))]
        more = [u for u, n in counted if sampled and (n == bound or (u in common and n == 0))]
        if more:  # held by more turns than counted: their share of a sample
            share = {str(u): int(hit) / int(seen) for u, hit, seen in all_rows(
                conn, SAMPLED, (min(100.0, 100.0 * SAMPLE_TURNS / total), more)) if seen}
            counted = [(u, min(max(round(share.get(u, 0.0) * total), bound), total)
                        if u in more else n) for u, n in counted]
        with _shares_lock:
            for unit, n in counted:
                having[unit] = float(n)
                if n >= DF_CACHE_MIN and total:
                    _shares[(database, unit)] = (n / total, total)
            while len(_shares) > DF_CACHE_SIZE:
                _shares.popitem(last=False)
    return [fts5_idf(total, having[u]) for u in units]


def _estimated(conn: Conn, unit: str) -> float:
    """How many turns the planner expects to hold ``unit`` (from the column's statistics;
    it ignores weights and word order)."""
    plan = one(conn, ESTIMATE, (unit,))[0]
    if isinstance(plan, str):
        plan = json.loads(plan)
    return float(plan[0]["Plan"]["Plan Rows"])


def keyword_sql(flt: HitFilter, *, picked: bool = False) -> tuple[str, list[object]]:
    """SQL and the filter's parameters for ranked keyword hits. The statement's
    parameters: the phrases' texts and IDFs, (``picked``: the candidates' ids and the
    derived index's watermark: those turns and every turn past it are ranked, no
    other, and each hit also says how many candidates matched), the rank weights, the
    whole query, the filter's, LIMIT twice."""
    clauses, params = where(
        ("t.session_id = ?", flt.session_id), ("f.role = ?", flt.role),
        ("f.created_at >= ?", flt.since), ("f.created_at < ?", flt.until),
        ("f.brief_id IS NOT NULL", flt.compressed_only),
        (turn_trace_sql("f") + " = ?", flt.trace_id))
    if flt.flag is not None:
        clauses.append(flag_condition(flt, "f.id", params, None))
    filtered = flt.reads_rows or flt.compressed_only
    join = " JOIN exchanges f ON f.id = t.rowid" if filtered else ""
    inner = (
        f"SELECT t.rowid AS id, (SELECT sum(u.idf * ts_rank(?::float4[], t.doc, u.q,"
        f" {RANK_NORMALIZATION}))"
        "   FROM units u) AS raw"
        + (", count(*) FILTER (WHERE t.held) OVER () AS matched" if picked else "")
        + f" FROM {'picked' if picked else 'exchanges_fts'} t" + join
        + " WHERE " + " AND ".join(["t.doc @@ to_tsquery('english', ?)", *clauses])
        + f" ORDER BY raw DESC LIMIT ? * {POOL}"
    )
    sql = (
        f"WITH units AS MATERIALIZED ({UNITS})" + (f", picked AS MATERIALIZED ({PICKED})"
                                                   if picked else "")
        +
        f" SELECT h.id, h.raw * pow(greatest(octet_length(e.content), 1), {LENGTH_PRIOR}::float8)"
        f" AS score{', h.matched' if picked else ''}"
        f" FROM ({inner}) h JOIN exchanges e ON e.id = h.id"
        " ORDER BY score DESC, h.id LIMIT ?"
    )
    return sql, params


def _any_of(query: Tsquery) -> bool:
    """Whether the query matches a turn holding any one of its phrases (an OR of them,
    as a question's words become), nothing more."""
    return query.text == "(" + " | ".join(f"({u})" for u in query.units) + ")"


def ranked_hits(conn: Conn, query: Tsquery, flt: HitFilter, limit: int
                ) -> list[tuple[int, float]]:
    """Best matches, best first. A store-wide search without filters is ranked over the
    derived index's candidates when it answers (``_from_candidates``). Otherwise a
    phrase held by half the turns or more adds at most MIN_IDF x its rank to a turn's
    score, less than any rarer word adds: when the query is an OR of phrases and the
    rarer ones are words of any column, the turns holding a rarer one are matched and
    ranked first (by every phrase), and only if fewer than ``limit`` do, all of the
    query's matches are. The same hits, without reading and ranking the common words'
    turns, which are most of the store (a session's turns are few: its search ranks
    them all)."""
    if query.text is None:
        return []
    sql, params = keyword_sql(flt)
    units = list(query.units)
    idfs = phrase_idfs(conn, units)
    derived = cast(_Located, conn).keywords
    if (derived is not None and flt.session_id is None and not flt.reads_rows
            and not flt.compressed_only):
        hits = _from_candidates(conn, derived, query, units, idfs, limit)
        if hits is not None:
            return hits

    def ranked(text: str) -> list[tuple[int, float]]:
        found = all_rows(conn, sql, (units, idfs, RANK_WEIGHTS, text, *params, limit, limit))
        return [(int(r[0]), float(r[1])) for r in found]

    rarer = [u for u, idf in zip(units, idfs, strict=True) if idf > MIN_IDF]
    if (flt.session_id is None and rarer and len(rarer) < len(units) and _any_of(query)
            and _ranked_where_matched(conn, rarer)):
        hits = ranked(" | ".join(f"({u})" for u in rarer))
        if len(hits) >= limit:
            return hits
    return ranked(query.text)


def _ranked_where_matched(conn: Conn, units: list[str]) -> bool:
    """Whether ``ts_rank`` of each of ``units`` is 0 for every turn it does not match: a
    word or a prefix, in any column. It is not for a phrase (a turn holding its words
    apart) or a word of the turn's own words (a turn holding it only in its context:
    ``ts_rank`` reads every position, whatever the query's weights); such a turn,
    matched by a common word alone, can out-rank the turns the unit matches."""
    terms = unit_terms(conn, units)
    return terms is not None and all(t is None or (t[0] == "all" and len(t[1]) == 1)
                                     for t in terms)


def _from_candidates(conn: Conn, derived: DerivedKeywords, query: Tsquery, units: list[str],
                     idfs: list[float], limit: int) -> list[tuple[int, float]] | None:
    """A store-wide query ranked over the derived index's candidates and the turns past
    its watermark (``store.postgres.keywords``); None when the index does not answer (a
    small store, too many turns past its watermark, a column other than the turn's own
    words or all of them, a prefix of too many lexemes, or too many candidates to read).

    The candidates have the query's shape without word order or distance (a phrase's
    words in any order, a NEAR group's anywhere), so some do not match: they are read
    in Tantivy's order, DEEPER times more each round, until DEPTH x the pool of them
    match, or none are left; when the share that matched says more than MAX_CANDIDATES
    would be needed, PostgreSQL ranks every match. An OR of words needs one round:
    every candidate matches."""
    index = derived.answering(conn)
    if index is None:
        return None
    terms = unit_terms(conn, units)
    if terms is None:
        return None
    sql, params = keyword_sql(HitFilter(), picked=True)
    wanted = DEPTH * POOL * limit
    count = wanted
    while True:
        read = index.candidates(terms, idfs, count, query.shape)
        if read is None:
            return None
        ids, watermark, more = read
        found = all_rows(conn, sql, (units, idfs, ids, watermark, RANK_WEIGHTS, query.text,
                                     *params, limit, limit))
        matched = int(found[0][2]) if found else 0
        if matched >= wanted or not more:
            return [(int(r[0]), float(r[1])) for r in found]
        if count >= MAX_CANDIDATES or count * wanted / max(matched, 1) > MAX_CANDIDATES:
            return None  # the share that matched says too many would be read
        count = min(count * DEEPER, MAX_CANDIDATES)


def keyword_hits(conn: Conn, expression: str, flt: HitFilter, limit: int, *,
                 own_words: bool = False) -> list[tuple[int, float]]:
    """Best matches as (exchange id, score), best first. Raises ``FtsSyntaxError`` when
    ``expression`` is not valid FTS5 (before any statement runs)."""
    return ranked_hits(conn, translate(expression, own_words=own_words), flt, limit)


def query_notes(expression: str, *, own_words: bool) -> list[str]:
    """What PostgreSQL matches differently from FTS5 in ``expression``."""
    return list(translate(expression, own_words=own_words).notes)
