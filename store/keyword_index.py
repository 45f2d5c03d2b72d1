"""The derived keyword index of a SQLite store: a Tantivy index beside the file.

FTS5's bm25() counts every query word over the whole index and scores every matching
row before it can return the best ten; Tantivy finds its top k with block-max WAND and
reads only the session's postings when a search is scoped, and those candidates are
scored again as FTS5 scores them (bench/keyword_index.py: at 100,000 turns a
store-wide search p50 14 ms against 40 ms, a session search 5.8 ms against 4.9 ms; the
same hits and scores as FTS5's). A caller's expression in FTS5 syntax made of phrases,
prefixes, NEAR groups, AND and OR is answered too (``search_syntax``, with
``store.keyword_syntax``), exactly: its candidates are read until Tantivy's score, an
upper bound of bm25(), shows no further row can enter the best. SQLite stays the source
of truth: FTS5 keeps every turn too, and runs what this index does not (the rest of FTS5
syntax, filters that read a turn's row, PostgreSQL), and every search while this index
is not known to be complete.

How it stays right:

* below ``KeywordIndex.answers_from`` turns a store keeps no index (FTS5 answers every
  search there); the write that brings it to that size builds one from the turns
  (``rebuild``: the store keeps it from the build's start on, ``meta`` ``keyword_index``);
* from then the one place a turn enters the keyword index
  (``store.exchanges.index_keywords``, ``Dialect.index_keyword_page``) also queues it in
  ``keyword_pending`` (its context and date words; the text is in ``exchanges``), in the
  same transaction: a turn is durable, and searchable, when its ingest returns. A
  forgotten turn is queued too (no row left behind it: its entry is deleted);
* searches read the index and, beside it, the queued turns (the hot tier: this
  process's copy of the queue, which takes the turns the process ingests from their
  text, ``hold``, and the others from the queue's rows); both are
  scored in this process as FTS5's bm25() scores them, with the index's statistics
  (``_fts5_bm25``), so the hits and scores are FTS5's; an index entry of a queued turn
  is never returned (it may be older than the queue's);
* a session's plain search is FTS5's (``counted_hits``: it walks only the session's
  matches), given each word's count over the store from the index and the queue where
  that count is exact (``phrase_rows``), so that FTS5 does not count it over its whole
  index;
* ``flush`` moves the queue into the index, on a thread of its own started by a search
  that finds it long (``store.db.Store.searched_keywords``, which lets FTS5 answer while
  the queue is too long to score beside the index): each queued id's entry deleted and
  written again in one commit, then the queue rows removed. A process killed anywhere in it
  leaves the rows queued; the next flush writes them again (idempotent). One process
  writes at a time (Tantivy's writer lock; the others leave the queue to it); another
  process reads the index again when entries left the queue, those it saw and those
  queued since it last looked (the queue's sequence tells);
* the index is trusted only when the id written in its directory is the store's
  (``meta`` ``keyword_index``): a store copied, restored or migrated without the
  directory, a directory lost, or a build killed before its end, is not, and
  ``rebuild`` (``stenographer index rebuild``, or at start-up) writes it again from the
  turns;
* the contract audit compares it with the turns (``audit_ids``).
"""

from __future__ import annotations

import contextlib
import functools
import heapq
import json
import math
import re
import shutil
import sys
import threading
import time
import uuid
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import apsw

from store import keyword_syntax
from store.errors import StoreError
from store.keyword_syntax import Expression, Node, Phrase
from store.search_filter import (
    BM25_B,
    BM25_K1,
    BM25_WEIGHTS,
    KEYWORD_FIELDS,
    MONTHS,
    POOL,
    HitFilter,
    fts5_idf,
)
from store.sql import Conn, Transactions, all_rows, first
from store.sqlite import bm25_top_path, doc_freq
from store.sqlite import search as fts5_search  # its LENGTH_PRIOR: the same length prior
from store.sqlite.tokens import fts_words
from store.upkeep import Upkeep


def _ids(values: list[int]) -> object:
    """A list of ids bound as one ``carray(?)`` parameter."""
    return apsw.carray(array("q", values))


class Store(Transactions, Protocol):
    """The SQLite store as this module uses it (``store.db.Store``, which opens this
    index: named by what it offers, so that neither module imports the other)."""

    path: Path
    read_only: bool

__all__ = [
    "BULK_QUEUE",
    "HOT_LIMIT",
    "Indexed",
    "KeywordEntry",
    "KeywordIndex",
    "build_due",
    "document_fields",
    "fts_words",
    "index_directory",
    "indexed",
    "keeps_index",
    "needs_rebuild",
    "queue_entries",
    "queue_removals",
    "search_state",
    "stored_turns",
]

# (exchange id, session row id, content, context words, dated words)
KeywordEntry = tuple[int, int, str, str, str]

# Tantivy's ranking, which chooses the candidates (docs/keyword_index.md): one field of
# the turn's words, context and date, a second of the turn's own words and date at
# OWN_BOOST, FTS5's IDF, the session a filter that does not score. Tantivy normalises
# length and saturates term counts per field, FTS5 per row over its weighted columns,
# so its order is FTS5's only roughly; the candidates are scored again as FTS5 scores
# them. OWN_BOOST is the one that brings FTS5's best POOL x limit highest in Tantivy's
# order (bench/keyword_index.py, "depth", store-wide at 100,000 turns, p95 / max in
# units of POOL x limit: 0.25 2.30 / 3.31; 0.5 2.96 / 8.66; 0 7.65 / 8.36; 1.0 7.08 /
# 16.3). As the ranking itself (LoCoMo dev through the server, recall@5 / @10 / the
# guard's brief recall@5) it gave 0.717 / 0.799 / 0.853 at 0.5 against FTS5's 0.730 /
# 0.802 / 0.851.
OWN_BOOST = 0.25
# That ranking only chooses candidates: the best DEPTH x POOL x limit of it are scored
# again exactly as FTS5's bm25() scores them (``_fts5_bm25``), then the length prior over
# the best POOL x limit, as FTS5's path does. DEPTH: how far down Tantivy's order FTS5's
# best POOL x limit lie, in units of POOL x limit (bench/keyword_index.py, "depth": at
# most 1.6 session-scoped, 2.0 store-wide at 20,000 turns, 1.5 and 2.9 at 100,000).
DEPTH = 3
# A caller's expression (``search_syntax``) reads Tantivy's candidates in its order (asked
# for SYNTAX_PAGE x POOL x limit, then twice as many at a time) until no row further down
# can enter FTS5's best POOL x limit; past SYNTAX_CANDIDATES, FTS5 answers.
# BOUND_SLACK: how far Tantivy's score of a row may lie below its bm25() score (Tantivy's
# row length counts the scope's token less and its scores are 32-bit floats; measured at
# most 0.07% at 100,000 turns).
SYNTAX_PAGE = 16
SYNTAX_CANDIDATES = 6_000
BOUND_SLACK = 1.01
# FTS5's columns body, context, dated (scope: one token of every row, weight 0).
BODY, CONTEXT, DATED, SCOPE = BM25_WEIGHTS

# Queued turns beyond HOT_LIMIT are moved into the index on a thread of its own, started
# by the next search (a commit costs a few milliseconds; the hot tier is scored in
# Python). Beyond BULK_QUEUE (a bulk import, a migration, a store that was not searched
# for a while), FTS5 answers until they are in: scoring them all in Python would cost
# the search more than FTS5 does, and waiting for the flush would stall it.
HOT_LIMIT = 128
BULK_QUEUE = 1_024
FLUSH_HEAP = 32_000_000
REBUILD_HEAP = 128_000_000
REBUILD_BATCH = 50_000
# The mark of an index of this layout (one of an older layout has none: it is rebuilt).
MARK_FILE = "store-id-2"
META_KEY = "keyword_index"

# A turn is queued only while the store keeps the index (``meta`` holds its key: from
# the moment its first build starts, ``KeywordIndex.rebuild``); below ``answers_from`` a
# store keeps none and queues nothing, FTS5 holds its turns. ``KEEPS`` is read once in
# the write that would queue, so that no statement runs a turn for an empty queue.
KEEPS = "SELECT 1 FROM meta WHERE key = 'keyword_index'"
INSERT_PENDING = """
INSERT OR REPLACE INTO keyword_pending(exchange_id, context, dated) VALUES (?, ?, ?)"""
SELECT_PENDING_SEQS = "SELECT seq, exchange_id FROM keyword_pending"
SELECT_QUEUED_SEQ = "SELECT seq FROM keyword_pending WHERE exchange_id = ?"
# The largest seq ever given to a queued entry (the queue's AUTOINCREMENT).
LAST_QUEUED = "SELECT seq FROM sqlite_sequence WHERE name = 'keyword_pending'"
ANY_PENDING = "SELECT 1 FROM keyword_pending LIMIT 1"
SELECT_PENDING_ROWS = """
SELECT p.seq, p.exchange_id, e.session_id, e.content, p.context, p.dated
FROM keyword_pending p LEFT JOIN exchanges e ON e.id = p.exchange_id
WHERE p.seq IN (SELECT value FROM carray(?1))"""
SELECT_ALL_PENDING = """
SELECT p.seq, p.exchange_id, e.session_id, e.content, p.context, p.dated
FROM keyword_pending p LEFT JOIN exchanges e ON e.id = p.exchange_id ORDER BY p.seq"""
DELETE_PENDING = "DELETE FROM keyword_pending WHERE seq IN (SELECT value FROM carray(?1))"
DELETE_PENDING_UPTO = "DELETE FROM keyword_pending WHERE seq <= ?"
# The largest turn id (at least the number of turns: ids only grow) and how many turns
# at most are queued: three seeks, whatever the sizes.
SEARCH_STATE = """
SELECT (SELECT coalesce(max(id), 0) FROM exchanges),
       coalesce((SELECT max(seq) FROM keyword_pending)
                - (SELECT min(seq) FROM keyword_pending) + 1, 0)"""
MAX_PENDING = "SELECT coalesce(max(seq), 0) FROM keyword_pending"
SELECT_MARK = "SELECT value FROM meta WHERE key = ?"
SET_MARK = "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)"
# The key's value while a build that began the index has not ended: never a mark, so
# the index is not trusted (FTS5 answers) until the build writes one.
STARTED = "started"
UNQUEUED_TURN = """
SELECT 1 FROM exchanges e
WHERE NOT EXISTS (SELECT 1 FROM keyword_pending p WHERE p.exchange_id = e.id) LIMIT 1"""


def queue_entries(conn: Conn, entries: Sequence[tuple[int, str, str]]) -> None:
    """Queue turns' entries ``(exchange id, context, dated)`` for the index (in the
    transaction that stores or re-indexes the turns), if the store keeps the index."""
    if entries and keeps_index(conn):
        conn.executemany(INSERT_PENDING, entries)


def queued_seq(conn: Conn, exchange_id: int) -> int | None:
    """The seq of a turn's entry in the queue (read in the write that queued it), or
    None: not queued (the store keeps no index)."""
    row = first(conn, SELECT_QUEUED_SEQ, (exchange_id,))
    return None if row is None else int(row[0])


def queue_removals(conn: Conn, ids: Sequence[int]) -> None:
    """Queue the removal of forgotten turns' entries (in the transaction that deletes
    them), if the store keeps the index."""
    if ids and keeps_index(conn):
        conn.executemany(INSERT_PENDING, [(i, None, None) for i in ids])


SELECT_STORED = """
SELECT id, session_id, created_at, content FROM exchanges ORDER BY session_id, id"""


def stored_turns(conn: Conn) -> Iterator[tuple[int, int, float, str]]:
    """Every stored turn ``(id, session row id, created_at, content)``, a session at a
    time, oldest first (streamed)."""
    for exchange_id, session_id, created_at, content in conn.execute(SELECT_STORED):
        yield int(exchange_id), int(session_id), float(created_at), str(content)


def search_state(conn: Conn) -> tuple[int, int]:
    """(the store's largest turn id, an upper bound of the turns queued for the index),
    read in ``conn``'s snapshot without reading the queue or the turns."""
    row = first(conn, SEARCH_STATE)
    return (int(row[0]), int(row[1])) if row is not None else (0, 0)


def keeps_index(conn: Conn) -> bool:
    """Whether the store keeps the derived index (turns are queued for it): once its
    first build has started (``KeywordIndex.rebuild``)."""
    return first(conn, KEEPS) is not None


def build_due(conn: Conn) -> bool:
    """Whether the derived index should be built now: the store has reached
    ``KeywordIndex.answers_from`` turns (bounded by its largest id) and keeps none yet."""
    largest, _ = search_state(conn)
    return largest >= KeywordIndex.answers_from and not keeps_index(conn)


def index_directory(db_path: Path) -> Path:
    """Where the derived keyword index of the store file ``db_path`` lives."""
    return db_path.with_name(db_path.name + ".keywords")


def needs_rebuild(store: Store) -> bool:
    """Whether the store's derived index must be written from its turns: the store has
    reached ``KeywordIndex.answers_from`` turns and keeps none yet (a store created
    before it, or one whose build did not start), or it keeps one not built for it (a
    store copied or restored without its directory, a build killed before its end) and
    the queue does not hold every turn. Reads no index."""
    if store.read_only:
        return False
    try:
        mark: str | None = (index_directory(store.path) / MARK_FILE).read_text().strip()
    except OSError:
        mark = None
    with store.read() as conn:
        row = first(conn, SELECT_MARK, (META_KEY,))
        if row is None:
            return search_state(conn)[0] >= KeywordIndex.answers_from
        if row[0] == mark:
            return False
        return first(conn, UNQUEUED_TURN) is not None


# A turn's words per FTS5 column (body, context, dated), each ``_spaced``, and their
# number in all columns.
Columns = tuple[tuple[str, str, str], int]


@dataclass(frozen=True)
class _Hot:
    """A queued turn as the index would hold it (None session: the turn is gone)."""

    exchange_id: int
    session_id: int | None
    length: int
    columns: Columns
    words: frozenset[str]


def _hot_entry(entry: KeywordEntry) -> _Hot:
    """A queued turn's entry as the hot tier holds it."""
    exchange_id, session_id, content, context, dated = entry
    length, columns = document_fields(content, context, dated)
    return _Hot(exchange_id, session_id, length, columns,
                frozenset(" ".join(columns[0]).split()))


def _int(value: object) -> int:
    """A fast field's value (every entry has each field)."""
    assert isinstance(value, int), value
    return value


def _spaced(words: Sequence[str]) -> str:
    """A column's words as the index stores them: joined and ended by spaces (a word is
    counted by its spaced form, without splitting the column)."""
    return f" {' '.join(words)} " if words else ""


def document_fields(content: str, context: str, dated: str) -> tuple[int, Columns]:
    """A turn's content's length in UTF-8 bytes and the words of FTS5's columns body,
    context and dated, as the index holds them."""
    body, around, when = fts_words(content), fts_words(context), fts_words(dated)
    return (len(content.encode("utf-8")),
            ((_spaced(body), _spaced(around), _spaced(when)),
             len(body) + len(around) + len(when)))


# A turn as the index takes it: exchange id, session row id, then ``document_fields``
# (which a rebuild's worker process computes).
Indexed = tuple[int, int, int, Columns]


def indexed(entry: KeywordEntry) -> Indexed:
    """``entry`` as the index takes it."""
    exchange_id, session_id, content, context, dated = entry
    return (exchange_id, session_id, *document_fields(content, context, dated))


def _phrase_count(column: str, phrase: tuple[str, ...]) -> int:
    """How many times ``phrase`` occurs in a column's words (``column``: ``_spaced``);
    within the column, as FTS5 counts."""
    if len(phrase) == 1:
        word = f" {phrase[0]} "
        count = column.count(word)
        if not count or f"{word}{phrase[0]} " not in column:
            return count
        return column.split().count(phrase[0])  # one next to itself: counted once above
    if f" {phrase[0]} " not in column:
        return 0
    tokens = column.split()
    width = len(phrase)
    first_token = phrase[0]
    return sum(1 for i, t in enumerate(tokens)
               if t == first_token and tuple(tokens[i:i + width]) == phrase)


def _scope_session(phrase: tuple[str, ...]) -> int | None:
    """The session whose scope token (``store.sqlite.search.scope_token``) ``phrase`` is."""
    word = phrase[0]
    if len(phrase) != 1 or not word.startswith("s") or not word[1:].isdigit():
        return None
    session = int(word[1:])
    return session if fts5_search.scope_token(session) == word else None


def _fts5_bm25(columns: Columns, phrases: Sequence[tuple[str, ...]], idfs: Sequence[float],
               avgdl: float) -> float:
    """FTS5's bm25() of a row, negated (higher is better): per phrase,
    ``idf * f * (k1 + 1) / (f + k1 * (1 - b + b * |D| / avgdl))`` with ``f`` the phrase's
    count in each column times the column's weight and ``|D|`` the row's tokens in all
    columns (the scope column's one token too); summed in the order FTS5 sums it."""
    (body, context, dated), words = columns
    norm = BM25_K1 * (1 - BM25_B + BM25_B * (words + 1) / avgdl)
    score = 0.0
    for phrase, idf in zip(phrases, idfs, strict=True):
        if len(phrase) == 1:  # most are one word: counted here, without a call
            word = f" {phrase[0]} "
            n_body, n_context, n_dated = (body.count(word), context.count(word),
                                          dated.count(word))
            if not (n_body or n_context or n_dated):
                continue  # adds 0.0, as FTS5's sum does
            twice = f"{word}{phrase[0]} "
            if twice in body or twice in context or twice in dated:
                n_body, n_context, n_dated = (_phrase_count(body, phrase),
                                              _phrase_count(context, phrase),
                                              _phrase_count(dated, phrase))
        else:
            n_body, n_context, n_dated = (_phrase_count(body, phrase),
                                          _phrase_count(context, phrase),
                                          _phrase_count(dated, phrase))
        f = BODY * n_body + CONTEXT * n_context + DATED * n_dated
        score += idf * (f * (BM25_K1 + 1)) / (f + norm)
    return score



def _bm25(counts: Sequence[int], idfs: Sequence[float], words: int, avgdl: float) -> float:
    """``_fts5_bm25`` of a row whose phrases' instances were counted in its body (a
    caller's expression: ``{body} : (...)``)."""
    norm = BM25_K1 * (1 - BM25_B + BM25_B * (words + 1) / avgdl)
    score = 0.0
    for count, idf in zip(counts, idfs, strict=True):
        if count:
            f = BODY * count
            score += idf * (f * (BM25_K1 + 1)) / (f + norm)
    return score


def _ranked(raw: list[tuple[float, int, int]], limit: int) -> list[tuple[int, float]]:
    """FTS5's path over (bm25 score, id, length in bytes): the best POOL x limit by
    bm25(), then the length prior; the best ``limit``, ties by id."""
    raw.sort(key=lambda r: (-r[0], r[1]))
    return fts5_search.best_first([(i, s * fts5_search.length_factor(n))
                                   for s, i, n in raw[:POOL * limit] if s > 0], limit)


def _keep_best(heap: list[float], size: int, score: float) -> None:
    """Keep in ``heap`` (a min-heap) the best ``size`` scores seen."""
    if len(heap) < size:
        heapq.heappush(heap, score)
    elif score > heap[0]:
        heapq.heapreplace(heap, score)


def _hot_candidates(hot: list[_Hot], session_id: int | None, exclude: set[int] | None
                    ) -> list[tuple[int, int, Columns]]:
    """The queued turns a search scores beside the index's candidates."""
    leave_out = exclude or set()
    return [(h.exchange_id, h.length, h.columns) for h in hot
            if h.session_id is not None and h.exchange_id not in leave_out
            and (session_id is None or h.session_id == session_id)]


def _without_deletes(meta: str) -> bool:
    """Whether Tantivy's record of an index's segments (its ``meta.json``) says that no
    segment holds deleted entries; False for a record not read as expected."""
    try:
        segments = json.loads(meta)["segments"]
        return not any((segment["deletes"] or {}).get("num_deleted_docs")
                       for segment in segments)
    except (ValueError, KeyError, TypeError, AttributeError):
        return False


def every_id(searcher: Any, query: Any, expect: int) -> set[int]:
    """The ``id`` of every document a Tantivy ``query`` matches (an audit's range), asked
    for ``expect`` (about how many there should be) and again for more while they fill
    the answer: more entries than turns are orphans, each of which must be named."""
    wanted = expect + 100
    while True:
        hits = searcher.search(query, wanted, count=False).hits
        if len(hits) < wanted:
            break
        wanted *= 4
    return {_int(i) for i in searcher.fast_field_values("id", [a for _, a in hits])}

class KeywordIndex:
    """The Tantivy index in ``directory`` and this process's copy of the queue."""

    # The index answers once it holds this many turns; below, FTS5 does, with the same
    # hits and scores (``search`` scores as FTS5 does). Re-scoring a candidate costs
    # ~12 µs in Python, so a small store is searched faster by FTS5's bm25() itself;
    # FTS5's cost grows with the store (docs/keyword_index.md: 100,000 turns, session
    # 4.9 vs 5.8 ms, store-wide 40 vs 13.5 ms; 1,000,000: 26 vs 8.4, 447 vs 29 ms).
    answers_from = 100_000

    def __init__(self, directory: Path, upkeep: Upkeep | None = None) -> None:
        import tantivy

        self._tv = tantivy
        self.directory = directory
        directory.mkdir(mode=0o700, exist_ok=True)
        b = tantivy.SchemaBuilder()
        # "all" holds three values, the FTS5 columns' words (stored: a candidate's counts
        # per column are read from them), "own" two, the body's and the date's.
        b.add_text_field("all", stored=True, tokenizer_name="steno", index_option="position")
        b.add_text_field("own", tokenizer_name="steno", index_option="position")
        b.add_unsigned_field("id", indexed=True, fast=True)
        b.add_unsigned_field("session", indexed=True, fast=True)
        b.add_unsigned_field("length", fast=True)
        b.add_unsigned_field("all_len", fast=True)
        self.schema = b.build()
        try:
            self.index = tantivy.Index(self.schema, path=str(directory), reuse=True)
        except ValueError:  # an index of an older layout: its mark goes with it (rebuilt)
            shutil.rmtree(directory)
            directory.mkdir(mode=0o700)
            self.index = tantivy.Index(self.schema, path=str(directory), reuse=True)
        from store.sqlite.schema import fts5_table

        # A caller's expression is checked by FTS5 on an empty table of the store's columns.
        self._syntax_check = apsw.Connection(":memory:")
        self._syntax_lock = threading.Lock()
        self._syntax_check.execute(fts5_table(KEYWORD_FIELDS))
        # The words the ``dated`` column holds besides a year's digits: the months'.
        self._months = frozenset(w for month in MONTHS for w in fts_words(month))
        self.analyzer = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build()
        self.index.register_tokenizer("steno", self.analyzer)
        self.index.config_reader(reload_policy="Manual")
        self._lock = threading.Lock()
        self._hot: dict[int, _Hot] = {}  # by queue seq
        self._last_queued = 0  # the largest queue seq this process has read the queue at
        self._reload_lock = threading.Lock()
        # Whether the commit the reader holds has no deleted entry (Tantivy's document
        # frequencies count those until their segment is merged), read by ``_reload``.
        self._whole = False
        self._averages: tuple[float, float] | None = None
        # Rows of the index holding a caller's phrase, counted for the statistics in
        # ``_averages`` (the index as this process last read it): (those, the counts).
        self._held: tuple[object, dict[Phrase, int]] = (None, {})
        self._trusted: str | None = None
        self._upkeep = upkeep or Upkeep()
        self._reload()

    # --- trust ----------------------------------------------------------------------------

    def _mark(self) -> str | None:
        try:
            return (self.directory / MARK_FILE).read_text().strip() or None
        except OSError:
            return None

    def answers(self) -> bool:
        """Whether searches should ask the index rather than FTS5 (``answers_from``)."""
        return int(self.index.searcher().num_docs) >= self.answers_from

    def trusted(self, conn: Conn) -> bool:
        """Whether the index was built for this store (else FTS5 answers)."""
        row = first(conn, SELECT_MARK, (META_KEY,))
        if row is None:
            return False
        if self._trusted == row[0]:
            return True
        if self._mark() == row[0]:
            self._trusted = str(row[0])
            return True
        return False

    def _set_mark(self, store: Store) -> None:
        mark = uuid.uuid4().hex
        path = self.directory / MARK_FILE
        temp = path.with_suffix(".tmp")
        temp.write_text(mark)
        temp.replace(path)
        with store.write() as conn:
            conn.execute(SET_MARK, (META_KEY, mark))
        self._trusted = mark

    # --- writing ----------------------------------------------------------------------------

    def _writer(self, heap: int) -> contextlib.AbstractContextManager[Any]:
        """Tantivy's writer, taken now (ValueError when another process holds it); on
        leaving, its merges are awaited and this process's reader reloaded."""
        writer = self.index.writer(heap_size=heap, num_threads=1)

        @contextlib.contextmanager
        def held() -> Iterator[Any]:
            try:
                yield writer
            finally:
                writer.wait_merging_threads()
                self._reload()

        return held()

    def _reload(self) -> None:
        """Read the index's last commit; its statistics are counted again. Whether it
        holds no deleted entry is read from Tantivy's record of its segments, before and
        after: the same record both times is the commit read."""
        with self._reload_lock:
            before = self._segments()
            self.index.reload()
            self._averages = None
            self._whole = (before is not None and before == self._segments()
                           and _without_deletes(before))

    def _segments(self) -> str | None:
        try:
            return (self.directory / "meta.json").read_text()
        except OSError:
            return None

    def _largest_id(self) -> int:
        searcher = self.index.searcher()
        hits = searcher.search(self._tv.Query.all_query(), 1, count=False,
                               order_by_field="id").hits
        return int(hits[0][0]) if hits else 0

    def _id_query(self, exchange_id: int) -> Any:
        # By query: deleting by term would look for a signed integer term and find none.
        return self._tv.Query.term_query(self.schema, "id", exchange_id)

    def _document(self, turn: Indexed) -> Any:
        exchange_id, session_id, length, ((body, around, when), count) = turn
        doc = self._tv.Document()
        doc.add_unsigned("id", exchange_id)
        doc.add_unsigned("session", session_id)
        doc.add_unsigned("length", length)
        doc.add_unsigned("all_len", count)
        for spaced in (body, around, when):
            doc.add_text("all", spaced)
        for spaced in (body, when):
            doc.add_text("own", spaced[1:-1])  # the words joined by spaces
        return doc

    def flush(self, store: Store) -> int:
        """Move the queued turns into the index; how many (0 when another process is
        writing it, or nothing was queued). The queue is read as a stream in one
        snapshot (a bulk store's first flush takes in 100,000 turns: their text is not
        held at once) and taken in with one commit."""
        with store.read() as conn:
            if first(conn, ANY_PENDING) is None:
                return 0
        try:
            writing = self._writer(FLUSH_HEAP)
        except ValueError:
            return 0  # another process or thread is writing it: it takes the queue in
        beside = self._upkeep.current()
        seqs: list[int] = []
        with writing as writer:
            top = self._largest_id()
            with store.read() as conn:
                for seq, exchange_id, session_id, content, context, dated in conn.execute(
                        SELECT_ALL_PENDING):
                    if beside:
                        # Beside the searches of this process: a document takes ~40 µs
                        # of the interpreter; without this, a search waiting for it would
                        # wait out the interpreter's switch interval (5 ms) at every turn.
                        time.sleep(0)
                    seqs.append(int(seq))
                    if int(exchange_id) <= top:  # held already (a re-index, a retried flush)
                        writer.delete_documents_by_query(self._id_query(int(exchange_id)))
                    if content is not None and context is not None:
                        writer.add_document(self._document(indexed(
                            (int(exchange_id), int(session_id), str(content), str(context),
                             str(dated)))))
            writer.commit()
        with store.write() as conn:
            conn.execute(DELETE_PENDING, (_ids(seqs),))
        return len(seqs)

    def flush_later(self, store: Store) -> None:
        """``flush`` on the store's upkeep thread (``store.upkeep``: one at a time): the
        search that finds the queue full does not wait for the commit; the queue is
        searched until it ends."""
        self._upkeep.start(functools.partial(self._flush_quietly, store),
                           "keyword-index-flush")

    def _flush_quietly(self, store: Store) -> None:
        try:
            self.flush(store)
        except Exception as ex:  # the queue stays: the next search tries again
            print(f"stenographer: the keyword index did not take its queue in: {ex}",
                  file=sys.stderr)

    def wait(self) -> None:
        """Until the work on the store's upkeep thread has ended (a flush, a build)."""
        self._upkeep.wait()

    def rebuild(self, store: Store, entries_of: Callable[[Conn], Iterable[Indexed]],
                *, first_build: bool = False) -> int:
        """Write the index again from ``entries_of(conn)`` (every stored turn as the
        index takes it, read in the snapshot in which the queue is read); the queue up to
        then is dropped, what is queued later stays queued. A store that keeps no index
        starts keeping it first (``meta``, before that snapshot: a turn stored while this
        runs is queued); ``first_build``: only that, none when the store keeps one already
        (its build started elsewhere: 0). Raises ``StoreError`` when another process is
        writing the index."""
        count = 0
        try:
            writing = self._writer(REBUILD_HEAP)
        except ValueError as ex:
            raise StoreError("another process is writing the derived keyword index "
                             f"({self.directory}); try again when it is done") from ex
        with writing as writer:
            with store.write() as conn:
                if keeps_index(conn):
                    if first_build:
                        return 0
                else:
                    conn.execute(SET_MARK, (META_KEY, STARTED))
            writer.delete_all_documents()
            with store.read() as conn:
                row = first(conn, MAX_PENDING)
                upto = int(row[0]) if row is not None else 0
                for entry in entries_of(conn):
                    writer.add_document(self._document(entry))
                    count += 1
            writer.commit()
        with store.write() as conn:
            conn.execute(DELETE_PENDING_UPTO, (upto,))
        self._set_mark(store)
        return count

    def build_later(self, store: Store, entries_of: Callable[[Conn], Iterable[Indexed]]
                    ) -> None:
        """The first build (``rebuild``, ``first_build``) on the store's upkeep thread
        (one at a time): the write that brought the store to ``answers_from`` does not
        wait for it; FTS5 answers until it ends."""
        def build() -> None:
            try:
                self.rebuild(store, entries_of, first_build=True)
            except Exception as ex:  # untrusted: rebuilt at the next start (needs_rebuild)
                print(f"stenographer: the keyword index was not built: {ex}",
                      file=sys.stderr)

        self._upkeep.start(build, "keyword-index-build")

    # --- reading ----------------------------------------------------------------------------

    def _refresh(self, conn: Conn) -> tuple[list[_Hot], set[int]]:
        """The queued turns (this process's copy brought up to date) and their ids."""
        seqs = {int(s): int(i) for s, i in all_rows(conn, SELECT_PENDING_SEQS)}
        row = first(conn, LAST_QUEUED)
        last = int(row[0]) if row is not None else 0
        with self._lock:
            gone = [s for s in self._hot if s not in seqs]
            for s in gone:
                del self._hot[s]
            # Entries queued since this process last read the queue and no longer in it
            # were taken in by another process (or replaced) without this one seeing
            # them: an import's whole queue, flushed before this process searched again.
            unseen = sum(1 for s in seqs if s > self._last_queued)
            if gone or unseen < last - self._last_queued:
                # the flush's commit came before the rows went: the reader sees it
                self._reload()
            self._last_queued = max(self._last_queued, last)
            new = [s for s in seqs if s not in self._hot]
            if new:
                for seq, exchange_id, session_id, content, context, dated in all_rows(
                        conn, SELECT_PENDING_ROWS, (_ids(new),)):
                    if content is None or context is None:
                        self._hot[int(seq)] = _Hot(int(exchange_id), None, 0,
                                                   (("", "", ""), 0), frozenset())
                        continue
                    self._hot[int(seq)] = _hot_entry((int(exchange_id), int(session_id),
                                                      str(content), str(context), str(dated)))
            hot = list(self._hot.values())
        return hot, set(seqs.values())

    def hold(self, seq: int, entry: KeywordEntry) -> None:
        """A turn this process has just queued (``seq``, committed) taken into its copy
        of the queue from the text it wrote, so that the next search neither reads nor
        tokenizes it (a search after 200 ingests spent ~6 ms there at 100,000 turns).
        A seq is never given twice, so the copy stays this entry's; one the queue no
        longer holds (a flush took it in meanwhile) leaves the copy at the next search,
        as any other."""
        hot = _hot_entry(entry)
        with self._lock:
            self._hot.setdefault(seq, hot)

    def _tokens(self, phrases: Sequence[str]) -> list[tuple[str, ...]]:
        """Each phrase's words (FTS5 scores a phrase given twice twice); none of a phrase
        without words."""
        return [t for t in (tuple(fts_words(p)) for p in phrases) if t]

    def _weights(self, searcher: Any, phrases: list[tuple[str, ...]], hot: list[_Hot]
                 ) -> list[tuple[float, float, float]]:
        """Per phrase: FTS5's IDF (``ln((N - n + 0.5) / (n + 0.5))``, at least MIN_IDF, over
        the index and the queued turns; n: the turns holding it), and the boosts that turn
        Tantivy's own IDF of each field (over the index) into it.

        Tantivy's IDF (``ln(1 + (N - n + 0.5) / (n + 0.5))``) never falls below ln 2:
        a word in most turns still counts, and its order of candidates would lie further
        from FTS5's."""
        every = [h for h in hot if h.session_id is not None]
        n_index = int(searcher.num_docs)
        total = n_index + len(every)
        out = []
        for tokens in phrases:
            # doc_freq counts deleted entries until their segment is merged
            df_all = [min(int(searcher.doc_freq("all", t)), n_index) for t in tokens]
            df_own = [min(int(searcher.doc_freq("own", t)), n_index) for t in tokens]
            session = _scope_session(tokens)
            if session is not None:  # FTS5 finds it in every row of that session too
                q, occur = self._tv.Query, self._tv.Occur
                either = q.boolean_query([
                    (occur.Should, q.term_query(self.schema, "all", tokens[0])),
                    (occur.Should, q.term_query(self.schema, "session", session))])
                held = int(searcher.search(either, 1, count=True).count or 0) + sum(
                    1 for h in every if tokens[0] in h.words or h.session_id == session)
            elif len(tokens) == 1:
                held = df_all[0] + sum(1 for h in every if tokens[0] in h.words)
            else:
                phrase = self._tv.Query.phrase_query(self.schema, "all", list(tokens))
                held = int(searcher.search(phrase, 1, count=True).count or 0) + sum(
                    1 for h in every if any(_phrase_count(c, tokens) for c in h.columns[0]))
            fts = fts5_idf(total, held)
            own_idf = sum(math.log(1.0 + (n_index - d + 0.5) / (d + 0.5)) for d in df_own)
            all_idf = sum(math.log(1.0 + (n_index - d + 0.5) / (d + 0.5)) for d in df_all)
            out.append((fts, fts / all_idf, OWN_BOOST * fts / own_idf))
        return out

    def _query(self, phrases: list[tuple[str, ...]], weights: list[tuple[float, float, float]],
               session_id: int | None) -> Any:
        q, occur = self._tv.Query, self._tv.Occur
        should = []
        for tokens, (_, all_boost, own_boost) in zip(phrases, weights, strict=True):
            for field, boost in (("all", all_boost), ("own", own_boost)):
                if len(tokens) == 1:
                    sub = q.term_query(self.schema, field, tokens[0])
                else:
                    sub = q.phrase_query(self.schema, field, list(tokens))
                should.append((occur.Should, q.boost_query(sub, boost)))
        words = q.boolean_query(should)
        if session_id is None:
            return words
        # The session is a filter: scored, its term would add the same amount to every
        # hit and bring the scores closer together.
        session = q.const_score_query(q.term_query(self.schema, "session", session_id), 0.0)
        return q.boolean_query([(occur.Must, session), (occur.Must, words)])

    def search(self, conn: Conn, phrases: Sequence[str], session_id: int | None, limit: int,
               exclude: set[int] | None = None) -> list[tuple[int, float]]:
        """The best ``limit`` turns matching any of ``phrases`` (in the session, if given;
        none of ``exclude``) as (exchange id, score), best first: the scores and order of
        FTS5's path (``store.sqlite.search.keyword_sql``) over the candidates Tantivy
        finds, and the queued turns."""
        scoring = self._tokens(phrases)
        tokens = list(dict.fromkeys(scoring))
        if not tokens:
            return []
        hot, queued = self._refresh(conn)
        skip = queued | (exclude or set())
        searcher = self.index.searcher()
        weights = self._weights(searcher, tokens, hot)
        wanted = DEPTH * POOL * limit + len(skip)
        found = searcher.search(self._query(tokens, weights, session_id), wanted,
                                count=False).hits
        candidates = self._candidates(searcher, found, skip)
        candidates += _hot_candidates(hot, session_id, exclude)
        idf = {t: w[0] for t, w in zip(tokens, weights, strict=True)}
        idfs = [idf[t] for t in scoring]
        avgdl = self._average_length(searcher, hot)
        return _ranked([(_fts5_bm25(columns, scoring, idfs, avgdl), i, n)
                        for i, n, columns in candidates], limit)

    def counted_hits(self, conn: Conn, expression: str, phrases: Sequence[str],
                     flt: HitFilter, limit: int) -> list[tuple[int, float]] | None:
        """A session's plain search answered by FTS5 (``store.sqlite.search.keyword_hits``,
        which walks only the session's matches and ranks them in C), once each phrase's
        count over the whole store is known without FTS5 counting it (20-60 ms for a
        common word at 1,000,000 turns): kept by the connection
        (``store.sqlite.doc_freq``), or read here from the index and the queue when that
        is exact (``phrase_rows``) and kept from then on. None when neither."""
        if not bm25_top_path():
            return None
        assert isinstance(conn, apsw.Connection)
        kept = doc_freq.snapshot(conn)
        if kept is None:
            return None
        missing = doc_freq.uncounted(kept, phrases)
        if missing:
            counts = self.phrase_rows(conn, missing, kept.rows)
            if counts is None:
                return None
            doc_freq.keep(kept, zip(missing, counts, strict=True))
        return fts5_search.kept_hits(conn, kept, expression, flt, limit)

    def phrase_rows(self, conn: Conn, phrases: Sequence[str], rows: int) -> list[int] | None:
        """How many turns of ``conn``'s snapshot hold each of ``phrases`` (the rows
        FTS5's bm25() counts for its IDF): Tantivy's document frequency of the word over
        the index and the queued turns holding it. ``rows``: FTS5's row count in that
        snapshot. A session's scope token (``s3``) is held by that session's turns too
        (FTS5 matches it in the scope column). Where the index holds deleted entries
        (which document frequencies count until their segment is merged), its live
        entries holding the word are counted instead (milliseconds for a common word at
        1,000,000 turns, against microseconds). None unless that is exact: a phrase of
        several words; a queued removal, or a queued turn the index holds as well (a
        re-index: both would count); an index and a queue that do not hold ``rows``
        turns together (a flush of another process this one has not read yet)."""
        words = []
        for phrase in phrases:
            tokens = tuple(fts_words(phrase))
            if len(tokens) != 1:
                return None
            words.append(tokens[0])
        hot, _ = self._refresh(conn)
        searcher: Any
        with self._reload_lock:
            searcher, whole = self.index.searcher(), self._whole
        if any(h.session_id is None for h in hot) or int(searcher.num_docs) + len(hot) != rows:
            return None
        if hot:
            q = self._tv.Query
            newest = q.range_query(self.schema, "id", self._tv.FieldType.Unsigned,
                                   min(h.exchange_id for h in hot), 2**63 - 1)
            if searcher.search(newest, 1, count=True).count:
                return None
        return [self._word_rows(searcher, whole, w, hot) for w in words]

    def _word_rows(self, searcher: Any, whole: bool, word: str, hot: list[_Hot]) -> int:
        """``phrase_rows`` of one word; ``whole``: the index holds no deleted entry."""
        q, occur = self._tv.Query, self._tv.Occur

        def live(query: Any) -> int:
            return int(searcher.search(q.const_score_query(query, 0.0), 1, count=True).count
                       or 0)

        def holding(field: str, value: str | int) -> int:
            if whole:
                return int(searcher.doc_freq(field, value))
            return live(q.term_query(self.schema, field, value))

        session = _scope_session((word,))
        if session is None:
            return holding("all", word) + sum(1 for h in hot if word in h.words)
        both = q.boolean_query([(occur.Must, q.term_query(self.schema, "all", word)),
                                (occur.Must, q.term_query(self.schema, "session", session))])
        return (holding("all", word) + holding("session", session) - live(both)
                + sum(1 for h in hot if word in h.words or h.session_id == session))

    def _candidates(self, searcher: Any, found: list[tuple[float, Any]], skip: set[int]
                    ) -> list[tuple[int, int, Columns]]:
        """The index's hits ``found`` as (id, length in bytes, columns), none of ``skip``."""
        candidates: list[tuple[int, int, Columns]] = []
        if found:
            addresses = [a for _, a in found]
            ids = searcher.fast_field_values("id", addresses)
            lengths = searcher.fast_field_values("length", addresses)
            words = searcher.fast_field_values("all_len", addresses)
            for address, i, n, w in zip(addresses, ids, lengths, words, strict=True):
                if _int(i) not in skip:
                    body, context, dated = searcher.doc(address).get_all("all")
                    candidates.append((_int(i), _int(n),
                                       ((str(body), str(context), str(dated)), _int(w))))
        return candidates

    # --- queries written in FTS5 syntax ---------------------------------------------------

    def syntax(self, expression: str) -> Expression | None:
        """A caller's expression as FTS5 reads it, or None when FTS5 must answer it
        (``store.keyword_syntax.parse``). Raises ``FtsSyntaxError`` as FTS5 would: it is
        checked by FTS5 itself, on an empty table of the store's columns (on the store's
        table the check would expand every prefix over the whole index)."""
        with self._syntax_lock:
            fts5_search.check_expression(self._syntax_check, expression)
        return keyword_syntax.parse(expression, self._query_words, self._dated)

    def _dated(self, token: str, prefix: bool) -> bool:
        """Whether the ``dated`` column can hold ``token`` (with ``prefix``: a token that
        begins with it): a month's word or a year's digits."""
        if token.isdigit():
            return True
        if prefix:
            return not token or any(m.startswith(token) for m in self._months)
        return token in self._months

    def _query_words(self, text: str, prefix: bool) -> list[str]:
        """A query's text as FTS5 tokenizes it (a phrase, ending in ``*`` or not)."""
        return fts_words(text, apsw.FTS5_TOKENIZE_QUERY
                         | (apsw.FTS5_TOKENIZE_PREFIX if prefix else 0))

    def _matching(self, phrase: Phrase, searcher: Any) -> list[tuple[tuple[str, ...], Any]] | None:
        """The token sequences ``phrase`` stands for (one per token a prefix stands for)
        and the Tantivy query of each, over the turns' own words: together they match
        the rows that hold the phrase there; None when a prefix stands for more than
        MAX_EXPANSIONS tokens."""
        q = self._tv.Query
        heads = [phrase.tokens]
        if phrase.prefix:
            found = searcher.terms_with_prefix("own", phrase.tokens[-1])
            if len(found) > keyword_syntax.MAX_EXPANSIONS:
                return None
            heads = [(*phrase.tokens[:-1], str(t)) for t, _ in found]
        return [(h, q.term_query(self.schema, "own", h[0]) if len(h) == 1
                 else q.phrase_query(self.schema, "own", list(h))) for h in heads]

    def search_syntax(self, conn: Conn, expression: Expression, session_id: int | None,
                      limit: int, exclude: set[int] | None = None
                      ) -> list[tuple[int, float]] | None:
        """``search`` for a caller's expression (``syntax``), matched in the turns' own
        words as FTS5's path matches it (``{body} : (...)``); None when FTS5 must answer
        (a prefix that stands for too many tokens, or more than SYNTAX_CANDIDATES
        candidates to read).

        Candidates come in Tantivy's order (``syntax_plan``); each is matched and scored
        again as FTS5 matches and scores it (``Expression.counts``, bm25() over the
        counts, the IDF of a phrase from the rows it matches alone, as FTS5's
        xQueryPhrase counts them). Tantivy's score of a row is at least its bm25()
        score (``_weighed``; measured at most 0.07% below it), so once a page's last
        score, times BOUND_SLACK, is below the best POOL x limit bm25() scores read,
        no row further down can enter them: the result is FTS5's."""
        hot, queued = self._refresh(conn)
        skip = queued | (exclude or set())
        searcher = self.index.searcher()
        stale = self._stale(searcher, queued)
        avgdl = self._average_length(searcher, hot, [size for size, _ in stale])
        plan = self.syntax_plan(searcher, expression, hot, session_id,
                                [body for _, body in stale])
        if plan is None:
            return None
        query, idfs = plan
        raw = []
        for turn, length, ((body, _, _), words) in _hot_candidates(hot, session_id, exclude):
            counts = expression.counts(body)
            if counts is not None:
                raw.append((_bm25(counts, idfs, words, avgdl), turn, length))
        pool = POOL * limit
        best: list[float] = []  # the best ``pool`` bm25() scores read, a heap
        for s, _, _ in raw:
            _keep_best(best, pool, s)
        offset, page = 0, SYNTAX_PAGE * pool
        while True:
            found = searcher.search(query, page, offset=offset, count=False).hits
            addresses = [a for _, a in found]
            ids = searcher.fast_field_values("id", addresses)
            lengths = searcher.fast_field_values("length", addresses)
            sizes = searcher.fast_field_values("all_len", addresses)
            for (bound, address), i, size, width in zip(found, ids, lengths, sizes,
                                                         strict=True):
                if len(best) == pool and bound * BOUND_SLACK < best[0]:
                    return _ranked(raw, limit)  # no row from here on can enter them
                if _int(i) in skip:
                    continue
                body = str(searcher.doc(address).get_all("all")[0])
                counts = expression.counts(body)
                if counts is not None:
                    score = _bm25(counts, idfs, _int(width), avgdl)
                    raw.append((score, _int(i), _int(size)))
                    _keep_best(best, pool, score)
            if len(found) < page:
                return _ranked(raw, limit)  # every match read
            offset += page
            if offset >= SYNTAX_CANDIDATES:
                return None
            page = min(2 * page, SYNTAX_CANDIDATES - offset)

    def _stale(self, searcher: Any, queued: set[int]) -> list[tuple[int, str]]:
        """(tokens in all columns, body's words) of the index's entries of queued turns:
        the queue replaces them (a re-indexed turn) or removes them (a forgotten one)."""
        if not queued:
            return []
        query = self._tv.Query.term_set_query(self.schema, "id", sorted(queued))
        found = searcher.search(query, 2 * len(queued) + 10, count=False).hits
        sizes = searcher.fast_field_values("all_len", [a for _, a in found])
        return [(_int(size), str(searcher.doc(a).get_all("all")[0]))
                for (_, a), size in zip(found, sizes, strict=True)]

    def syntax_plan(self, searcher: Any, expression: Expression, hot: list[_Hot],
                    session_id: int | None, stale: Sequence[str] = ()
                    ) -> tuple[Any, list[float]] | None:
        """(Tantivy's query that ranks the candidates, FTS5's IDF of each phrase: ``n``
        the rows that hold it in their own words, counted in the index (its live
        entries, less ``stale``, the bodies of entries the queue replaces or removes)
        and in the queue), or None when a prefix stands for too many tokens."""
        q, occur = self._tv.Query, self._tv.Occur
        every = [h for h in hot if h.session_id is not None]
        n_index = int(searcher.num_docs)
        total = n_index - len(stale) + len(every)
        idfs: list[float] = []
        scored_parts: list[Any] = []
        for phrase in expression.phrases:
            matching = self._matching(phrase, searcher)
            if matching is None:
                return None
            held = self._rows_holding(phrase, matching, searcher)
            held -= sum(1 for body in stale if phrase.count(body))
            held += sum(1 for h in every if phrase.count(h.columns[0][0]))
            fts = fts5_idf(total, held)
            idfs.append(fts)
            scored_parts.append(self._weighed(matching, fts, searcher, n_index))
        query = self._syntax_query(expression, expression.root, scored_parts)
        if session_id is not None:
            session = q.const_score_query(q.term_query(self.schema, "session", session_id),
                                          0.0)
            query = q.boolean_query([(occur.Must, session), (occur.Must, query)])
        return query, idfs

    def _rows_holding(self, phrase: Phrase, matching: list[tuple[tuple[str, ...], Any]],
                      searcher: Any) -> int:
        """How many live entries of the index hold ``phrase`` in their own words (its
        queries ``matching``): counted (Tantivy's doc_freq counts deleted entries until
        their segment is merged) once for the index as this process last read it."""
        stats, held = self._held
        if stats is not self._averages or len(held) >= 4_096:
            held = {}
            self._held = (self._averages, held)
        if phrase not in held:
            q, occur = self._tv.Query, self._tv.Occur
            count = 0
            if matching:
                either = matching[0][1] if len(matching) == 1 else q.boolean_query(
                    [(occur.Should, m) for _, m in matching])
                count = int(searcher.search(either, 1, count=True).count or 0)
            held[phrase] = count
        return held[phrase]

    def _weighed(self, matching: list[tuple[tuple[str, ...], Any]], idf: float,
                 searcher: Any, n_index: int) -> Any:
        """A phrase's candidate query: each of its queries (``_matching``, over the turn's
        own words) required, scored by the same words in all the row's words, boosted so
        that Tantivy's IDF of them becomes FTS5's IDF of the phrase. Over all the row's
        words Tantivy's BM25 normalises by the row's length as bm25() does, and counts
        at least the instances bm25() counts: its score is an upper bound of bm25()'s
        (``search_syntax``)."""
        q, occur = self._tv.Query, self._tv.Occur
        if not matching:
            return q.empty_query()
        parts = []
        for head, m in matching:
            weight = sum(math.log(1.0 + (n_index - d + 0.5) / (d + 0.5)) for d in (
                min(int(searcher.doc_freq("all", t)), n_index) for t in head))
            scored = (q.term_query(self.schema, "all", head[0]) if len(head) == 1
                      else q.phrase_query(self.schema, "all", list(head)))
            parts.append(q.boolean_query([
                (occur.Must, q.const_score_query(m, 0.0)),
                (occur.Must, q.boost_query(scored, idf / weight if weight > 0 else 1.0))]))
        return parts[0] if len(parts) == 1 else q.boolean_query(
            [(occur.Should, p) for p in parts])

    def _syntax_query(self, expression: Expression, node: Node, parts: list[Any]) -> Any:
        """Tantivy's query of an expression's node: AND as required clauses, OR as
        optional ones, a NEAR group as ``_near_query``."""
        q, occur = self._tv.Query, self._tv.Occur
        if node.kind == "phrase":
            return parts[node.phrases[0]]
        if node.kind == "near":
            return self._near_query(expression, node, parts)
        kind = occur.Must if node.kind == "and" else occur.Should
        return q.boolean_query([(kind, self._syntax_query(expression, c, parts))
                                for c in node.children])

    def _near_query(self, expression: Expression, node: Node, parts: list[Any]) -> Any:
        """A NEAR group's candidate query: its phrases required and scored (FTS5 counts
        only their instances near each other: fewer); two one-word phrases also within
        the distance either way round (Tantivy's sloppy phrase: a filter)."""
        q, occur = self._tv.Query, self._tv.Occur
        clauses = [(occur.Must, parts[i]) for i in node.phrases]
        group = [expression.phrases[i] for i in node.phrases]
        if len(group) == 2 and all(len(p.tokens) == 1 for p in group):
            if any(p.prefix for p in group):
                words: list[str | tuple[int, str]] = [
                    re.escape(p.tokens[0]) + (".*" if p.prefix else "") for p in group]
                orders = [q.regex_phrase_query(self.schema, "own", w, slop=node.distance)
                          for w in (words, words[::-1])]
            else:
                plain: list[str | tuple[int, str]] = [p.tokens[0] for p in group]
                orders = [q.phrase_query(self.schema, "own", w, slop=node.distance)
                          for w in (plain, plain[::-1])]
            near = q.boolean_query([(occur.Should, o) for o in orders])
            clauses.append((occur.Must, q.const_score_query(near, 0.0)))
        return q.boolean_query(clauses)

    def _average_length(self, searcher: Any, hot: list[_Hot], stale: Sequence[int] = ()
                        ) -> float:
        """FTS5's avgdl: the mean of the rows' tokens in all columns (the scope's one
        token too), over the index and the queued turns; ``stale``: the tokens of
        entries the queue replaces or removes (counted out)."""
        if self._averages is None:
            n = searcher.num_docs
            if n == 0:
                self._averages = (0.0, 0.0)
            else:
                agg = searcher.aggregate(self._tv.Query.all_query(),
                                         {"a": {"sum": {"field": "all_len"}}})
                self._averages = (float(agg["a"]["value"] or 0.0), float(n))
        tokens, rows = self._averages
        every = [h for h in hot if h.session_id is not None]
        tokens += sum(h.columns[1] for h in every) + rows + len(every)
        rows += len(every)
        tokens -= sum(stale) + len(stale)
        rows -= len(stale)
        return tokens / rows if rows else 1.0

    # --- the contract audit -----------------------------------------------------------------

    def audit_ids(self, conn: Conn, lo: int, hi: int, session_id: int | None, expect: int
                  ) -> tuple[set[int], set[int]]:
        """(ids the index holds in (lo, hi] (of the session), ids queued in that range);
        ``expect``: about how many it should hold (the turns there)."""
        q, occur = self._tv.Query, self._tv.Occur
        self._reload()
        searcher = self.index.searcher()
        query = q.range_query(self.schema, "id", self._tv.FieldType.Unsigned, max(lo, 0), hi,
                              include_lower=False, include_upper=True)
        if session_id is not None:
            query = q.boolean_query([(occur.Must, query), (occur.Must, q.term_query(
                self.schema, "session", session_id))])
        held = every_id(searcher, query, expect)
        queued = {int(i) for _, i in all_rows(conn, SELECT_PENDING_SEQS) if lo < int(i) <= hi}
        return held, queued

    def delete_entry(self, exchange_id: int) -> None:
        """Remove one entry (tests: a stale index)."""
        with self._writer(FLUSH_HEAP) as writer:
            writer.delete_documents_by_query(self._id_query(exchange_id))
            writer.commit()

    def add_entry(self, entry: KeywordEntry) -> None:
        """Add one entry (tests: an orphan entry)."""
        with self._writer(FLUSH_HEAP) as writer:
            writer.add_document(self._document(indexed(entry)))
            writer.commit()
