"""What keyword search shares across dialects: the filter of hits, the column weights,
the candidate pool and the syntax error.

Queries reach the store in FTS5 syntax on both dialects: SQLite runs it
(``store.sqlite.search``), PostgreSQL translates it to a tsquery
(``store.postgres.search``). Either rejects an expression FTS5 would reject with
``FtsSyntaxError``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from store.schema import KeywordTable

__all__ = [
    "ANY_FLAG",
    "BM25_B",
    "BM25_K1",
    "BM25_WEIGHTS",
    "FTS_TOKENIZE",
    "KEYWORD_FIELDS",
    "MIN_IDF",
    "MONTHS",
    "POOL",
    "FtsSyntaxError",
    "HitFilter",
    "dated_terms",
    "flag_condition",
    "fts5_idf",
    "live_sql",
]

# bm25() column weights: body, context, dated, scope. The context column holds a few
# dozen words of the turns before it: a match there counts half as much as one in the
# turn. Measured on LoCoMo-format conversations (bench/locomo.py): without the column
# recall@10 falls from 0.80 to 0.70; weights 0.4-0.6 are within a point of 0.5.
# The keyword index's tokenizer (FTS5's, and the derived index's); store.search quotes
# queries for it.
FTS_TOKENIZE = "porter unicode61 remove_diacritics 2"
BM25_WEIGHTS = (1.0, 0.5, 1.0, 0.0)
# The keyword table with those columns, as the migrations declare it.
KEYWORD_FIELDS = KeywordTable("exchanges_fts", ("body", "context", "dated", "scope"),
                              FTS_TOKENIZE)
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")


def dated_terms(seconds: float) -> str:
    """What the ``dated`` column holds for a turn: its UTC month and year, "May 2023"."""
    moment = time.gmtime(seconds)
    return f"{MONTHS[moment.tm_mon - 1]} {moment.tm_year}"


# The ranking's length term is applied to the best POOL x LIMIT matches only.
POOL = 2

# bm25()'s constants (SQLite's fts5_aux.c, store/sqlite/bm25_top.c), which every keyword
# path that scores as FTS5 does uses: k1, b and the least IDF.
BM25_K1, BM25_B, MIN_IDF = 1.2, 0.75, 1e-6


def fts5_idf(rows: float, holding: float) -> float:
    """bm25()'s IDF of a phrase that ``holding`` of ``rows`` rows hold, at least MIN_IDF.
    (FTS5 raises only an IDF of 0 or less to MIN_IDF and keeps one between 0 and it: a
    word held by (N - 1) / 2 of N rows, N above 2,000,000, is read here as MIN_IDF.)"""
    return max(math.log((max(rows - holding, 0) + 0.5) / (holding + 0.5)), MIN_IDF)

ANY_FLAG = "NAFE"


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


def live_sql(session_param: str) -> str:
    """The ids of a session's live (uncompressed) turns.

    Within a session, the compressed turns are all but these few (at most a batch or
    so): one small list read from the partial index ``exchanges_live`` replaces a lookup
    of every candidate's row to test ``brief_id IS NOT NULL``.
    """
    return ("SELECT l.id FROM exchanges l"
            f" WHERE l.session_id = {session_param} AND l.brief_id IS NULL")


def flag_condition(flt: HitFilter, id_column: str, params: list[object],
                   numbered: int | None) -> str:
    """An EXISTS over the turn's flags; ``numbered``: offset of ?N parameters, else ?."""
    sql = f"EXISTS (SELECT 1 FROM signal_flags g WHERE g.exchange_id = {id_column}"
    if flt.flag != ANY_FLAG:
        params.append(flt.flag)
        sql += f" AND g.signature = ?{len(params) + numbered}" if numbered is not None \
            else " AND g.signature = ?"
    return sql + ")"
