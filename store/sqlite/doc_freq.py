"""The keyword index's document frequencies, kept between searches: how many rows hold
each phrase, which FTS5's bm25() counts over the whole index for every statement
(``xQueryPhrase``: about half of a session search's statement at 20,000 turns), handed
to the ranking function instead (``store/sqlite/bm25_top.c``, its counts argument).

Exact, in the statement's own snapshot:

* turns are appended with growing rowids under SQLite's one writer, so a phrase counted
  up to rowid ``last`` is brought up to date by counting its rows above ``last``, newest
  first (FTS5 reads the phrase's list from its end back to ``last``), in the one
  statement that counts all of a search's phrases;
* a row removed (a forget, a turn indexed again: its row is removed first, a migration,
  the table made again) raises ``meta``'s epoch in the writing transaction, by a trigger
  on FTS5's own table of row sizes (``store.sqlite.schema.keyword_epoch``), whichever
  code or process writes; a changed epoch drops what was kept. A row written below the
  largest rowid of the last search without a removal (an index written out of id
  order) shows in the row count: more rows than the last search's and those above its
  largest rowid; that drops what was kept too. Merging FTS5's segments changes no
  count;
* the epoch, the largest rowid, the row count (FTS5's averages record, which its
  ``xRowCount`` reads), the rows above the last search's largest rowid and the counts
  are read in the transaction the keyword statement then runs in, so they are of its
  snapshot; the ranking function uses the counts only when that row count is the
  table's. Outside a read transaction (no snapshot to share, or a write that may roll
  back) nothing is handed over or kept.

Kept per connection (a connection reads one file for its life, and is one thread's),
``MAX_PHRASES`` at most, with the lengths of the turns its searches ranked
(``store.sqlite.search.ranked``). Without the compiled ranking function (FTS5's bm25())
no count is kept.

A connection that keeps no count of a phrase takes it, when the phrase is one word, from
the store's common words (``Words``): how many rows held each word that at least
``COMMON_ROWS`` rows held, read in one pass over the index (FTS5's ``fts5vocab``, its
``row`` table: 36 ms of CPU at 20,000 turns, 0.14 s at 90,000) by a thread of the
store's (``store.db.Store``, in a server). Counting a common word over the whole index
costs a search about as much as the rest of its statement (0.3 ms a word at 20,000
turns, 1.2 ms at 90,000), and a process starts with no count of its own, so a new
server's first searches, and any search with a word not asked for before, paid it.
The words' count is of their own snapshot, brought up to date as a kept count is (the
rows above its largest rowid), and only in a snapshot that holds exactly the rows it
counted: the same epoch, and as many rows up to its largest rowid.
"""

from __future__ import annotations

import threading
import weakref
from array import array
from collections.abc import Iterable, Sequence

import apsw

from store.keyword_syntax import fts_phrase
from store.sql import all_rows, first
from store.sqlite.schema import EPOCH_KEY
from store.sqlite.tokens import fts_words

__all__ = ["COMMON_ROWS", "MAX_PHRASES", "CommonWords", "Kept", "Words", "counts_arg",
           "counts_in", "keep", "phrase_counts", "read_words", "rows_holding", "share",
           "snapshot", "uncounted"]

MAX_PHRASES = 4096  # per connection; more, and all are dropped (counted again as needed)
# A phrase kept up to a rowid at most MAX_BEHIND below the largest is brought up to date
# by the rows above it; further behind, it is counted again over the whole index (as
# bm25() counts it; from the derived keyword index's size, that index counts it).
MAX_BEHIND = 2_000
TXN_READ = 1  # sqlite3_txn_state: a read transaction (2: a write one)
# The epoch, the largest rowid, FTS5's averages record (its row count first), the rows
# above the largest rowid of the connection's last search (?1) and the rows above the
# store's common words' largest rowid (?2), counted up to ?3 (more: out of their reach).
STATE = f"""
SELECT (SELECT value FROM meta WHERE key = '{EPOCH_KEY}'),
       (SELECT coalesce(max(id), 0) FROM exchanges_fts_docsize),
       (SELECT block FROM exchanges_fts_data WHERE id = 1),
       (SELECT count(*) FROM exchanges_fts_docsize WHERE id > ?1),
       (SELECT count(*) FROM (SELECT 1 FROM exchanges_fts_docsize WHERE id > ?2 LIMIT ?3))"""
NONE_ABOVE = 1 << 62
# A word held by fewer rows costs little to count over the whole index (a statement's
# fixed cost: about 25 us); at most COMMON_WORDS words, the most held, are read.
COMMON_ROWS = 32
COMMON_WORDS = 1 << 16
# A count taken from the store's common words is brought up to date over up to a
# WORDS_REACH-th of the index (at least MAX_BEHIND rows): counting a phrase's rows
# above a rowid, newest first, costs about twice as much a row as counting all of them
# (3 phrases a quarter of the index behind: 370 against 706 us at 20,000 turns, 1,241
# against 2,840 at 90,000), and the words are read only below the derived keyword
# index's size (KeywordIndex.answers_from), where nothing else counts a word cheaply.
# They are read again once half that far behind (``CommonWords.due``).
WORDS_REACH = 4
VOCABULARY = ("CREATE VIRTUAL TABLE IF NOT EXISTS temp.exchanges_fts_rows"
              " USING fts5vocab(main, exchanges_fts, row)")
WORD_ROWS = ("SELECT term, doc FROM temp.exchanges_fts_rows WHERE doc >= ?"
             " ORDER BY doc DESC LIMIT ?")
# A phrase's rows: all of them, or those above a rowid, newest first (FTS5 then reads the
# phrase's list from its end; forward from the rowid it reads from the list's start: at
# 90,000 turns, 3 phrases a row behind 190 against 410 us).
COUNT_ALL = "(SELECT count(*) FROM exchanges_fts WHERE exchanges_fts MATCH ?{m})"
COUNT_ABOVE = ("(SELECT count(*) FROM (SELECT rowid FROM exchanges_fts"
               " WHERE exchanges_fts MATCH ?{m} AND rowid > ?{n} ORDER BY rowid DESC))")


class Words:
    """How many rows held each of the index's common words (FTS5's tokens: stems, folded)
    in one snapshot: its epoch, its largest rowid ``top`` and its row count."""

    def __init__(self, epoch: int, top: int, rows: int, counts: dict[str, int]) -> None:
        self.epoch, self.top, self.rows, self.counts = epoch, top, rows, counts

    def rows_of(self, phrase: str) -> int | None:
        """The rows holding ``phrase`` when it is one word, and a common one; else None."""
        tokens = fts_words(phrase)
        return self.counts.get(tokens[0]) if len(tokens) == 1 else None


class CommonWords:
    """A store's common words for all its connections (``share``): the last read
    (``read_words``), and whether a search found them of rows its snapshot does not hold
    (a removal since, or a row written below their largest rowid)."""

    def __init__(self) -> None:
        self.words: Words | None = None
        self.stale = False

    def due(self, largest: int) -> bool:
        """Whether they are to be read (again) at the largest rowid ``largest``: none
        yet, found stale, or half their reach behind it."""
        words = self.words
        return words is None or self.stale or largest - words.top > _reach(largest) // 2

    def take(self, words: Words | None) -> None:
        """``words``, just read, replace the last ones."""
        self.words, self.stale = words, False


class Kept:
    """One connection's counts: phrase -> (largest rowid counted, rows holding it), and
    the snapshot of its last search: the epoch, the largest rowid, the row count, and
    the store's common words when they count rows of it. Also the length in bytes of
    each turn the search ranked (``store.sqlite.search.ranked``), by rowid: a turn's
    content never changes while its rowid stays in the index, and removing it raises the
    epoch, which makes a new ``Kept``."""

    def __init__(self, epoch: int, top: int, rows: int) -> None:
        self.epoch, self.top, self.rows = epoch, top, rows
        self.counts: dict[str, tuple[int, int]] = {}
        self.lengths: dict[int, int] = {}
        self.words: Words | None = None


_kept: weakref.WeakKeyDictionary[apsw.Connection, Kept] = weakref.WeakKeyDictionary()
_shared: weakref.WeakKeyDictionary[apsw.Connection, CommonWords] = weakref.WeakKeyDictionary()
_lock = threading.Lock()  # the dictionaries'; a connection's own counts are its thread's


def share(conn: apsw.Connection, common: CommonWords) -> None:
    """Let ``conn``'s searches take counts from ``common`` (its store's)."""
    with _lock:
        _shared[conn] = common


def _varint(data: bytes) -> int:
    """SQLite's variable-length integer at the start of ``data`` (FTS5's records)."""
    value = 0
    for i, byte in enumerate(data[:9]):
        if i == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value
    return value


def snapshot(conn: apsw.Connection) -> Kept | None:
    """What ``conn`` keeps, brought to its current snapshot (kept from its last search
    when still exact, else new); None outside a read transaction."""
    with _lock:
        kept, common = _kept.get(conn), _shared.get(conn)
    words = None if common is None else common.words
    state = _state(conn, NONE_ABOVE if kept is None else kept.top,
                   NONE_ABOVE if words is None else words.top,
                   0 if words is None else _within_reach(words.top) + 1)
    if state is None:
        return None
    epoch, top, rows, above, above_words = state
    if (kept is None or top < kept.top
            or not _same_rows(kept.epoch, kept.rows, epoch, rows - above)):
        # Rows only appended since the last search: the rows now are the rows then and
        # those above its largest rowid. More: a row was written below it (without a
        # removal, which raises the epoch): what was kept may miss it.
        kept = Kept(epoch, top, rows)
        with _lock:
            _kept[conn] = kept
    kept.top, kept.rows = top, rows
    kept.words = None
    if words is not None and words.top <= top and above_words <= _within_reach(words.top):
        if _same_rows(words.epoch, words.rows, epoch, rows - above_words):
            kept.words = words
        else:
            assert common is not None
            common.stale = True
    return kept


def _state(conn: apsw.Connection, kept_top: int, words_top: int = NONE_ABOVE,
           words_limit: int = 0) -> tuple[int, int, int, int, int] | None:
    """In ``conn``'s snapshot: the epoch, the largest rowid, the row count, and the rows
    above ``kept_top`` and above ``words_top``, the latter counted up to ``words_limit``
    (NONE_ABOVE: none); None outside a read transaction."""
    if conn.get_autocommit():
        return None
    row = first(conn, STATE, (kept_top, words_top, words_limit))
    if row is None or row[0] is None or row[2] is None or conn.txn_state("main") != TXN_READ:
        return None
    return int(row[0]), int(row[1]), _varint(bytes(row[2])), int(row[3]), int(row[4])


def _same_rows(epoch_then: int, rows_then: int, epoch: int, rows_up_to_then: int) -> bool:
    """Whether the rows up to a rowid are those counted then: none removed since (the
    same epoch) and as many (the rows now less those above it): rows are only appended
    above the largest rowid, so no other could have been written."""
    return epoch == epoch_then and rows_up_to_then == rows_then


def read_words(conn: apsw.Connection) -> Words | None:
    """The index's common words in ``conn``'s snapshot: call in a read transaction
    (None outside one). ``fts5vocab`` reads every word's rows: a pass over the index."""
    conn.execute(VOCABULARY)  # the connection's temporary schema: nothing written
    state = _state(conn, NONE_ABOVE)
    if state is None:
        return None
    epoch, top, rows, _, _ = state
    counts = {str(term): int(n) for term, n in all_rows(conn, WORD_ROWS,
                                                         (COMMON_ROWS, COMMON_WORDS))}
    return Words(epoch, top, rows, counts)


def phrase_counts(conn: apsw.Connection, phrases: Sequence[str | None]) -> bytes | None:
    """The counts argument of ``bm25_top`` for a MATCH of ``phrases`` in FTS5's order
    (a phrase's text, quoted as one FTS5 string and matched in every column; None for
    one left to FTS5 to count, such as the session's scope token): the table's row
    count, the epoch (which keys the row sizes the ranking function keeps), then each
    phrase's rows (-1: not given), in ``conn``'s current snapshot. None when nothing can
    be given (see the module's notes)."""
    kept = snapshot(conn)
    return None if kept is None else counts_in(conn, kept, phrases)


def uncounted(kept: Kept, phrases: Sequence[str]) -> list[str]:
    """The phrases ``counts_in`` would count over the whole index in ``kept``'s
    snapshot: not kept, kept too far behind, or kept of rows it does not hold."""
    return [phrase for phrase in dict.fromkeys(phrases) if _start(kept, phrase) is None]


def _start(kept: Kept, phrase: str) -> tuple[int, int] | None:
    """Where ``phrase``'s count in ``kept``'s snapshot is brought up to date from: (the
    largest rowid counted, the rows holding it up to there), kept by the connection or
    taken from the store's common words; None: it is counted over the whole index."""
    top = kept.top
    last, n = kept.counts.get(phrase, (0, 0))
    if last > 0 and top - last <= MAX_BEHIND:
        return last, n
    words = kept.words
    if (words is not None and top - words.top <= _reach(top)
            and (common := words.rows_of(phrase)) is not None):
        return words.top, common
    return None


def _reach(top: int) -> int:
    """How far behind ``top`` the store's common words are brought up to date from."""
    return max(MAX_BEHIND, top // WORDS_REACH)


def _within_reach(words_top: int) -> int:
    """The most rows there can be above ``words_top`` while a store's common words of
    that largest rowid are within ``_reach`` of the largest rowid ``top``: top - words_top
    <= top // WORDS_REACH gives top - words_top <= words_top // (WORDS_REACH - 1)."""
    return max(MAX_BEHIND, words_top // (WORDS_REACH - 1))


def keep(kept: Kept, counts: Iterable[tuple[str, int]]) -> None:
    """Keep (phrase, rows holding it) counted exactly in ``kept``'s snapshot (by
    ``counts_in``, or from the derived keyword index: ``KeywordIndex.phrase_rows``)."""
    known, top = kept.counts, kept.top
    counted = list(counts)
    if len(known) + len(counted) > MAX_PHRASES:
        known.clear()
    for phrase, n in counted:
        known[phrase] = (top, n)


def counts_in(conn: apsw.Connection, kept: Kept, phrases: Sequence[str | None]) -> bytes:
    """``phrase_counts`` in the snapshot ``kept`` was just brought to (``snapshot``)."""
    return counts_arg(kept, rows_holding(conn, kept, phrases))


def counts_arg(kept: Kept, counts: Sequence[int]) -> bytes:
    """``bm25_top``'s counts argument: ``kept``'s row count and epoch, then ``counts``
    (a phrase's rows; -1: not given; -2: a phrase that only selects rows, scored as
    another phrase of the expression)."""
    return array("q", [kept.rows, kept.epoch, *counts]).tobytes()


def rows_holding(conn: apsw.Connection, kept: Kept, phrases: Sequence[str | None]
                 ) -> list[int]:
    """How many rows of ``kept``'s snapshot hold each of ``phrases`` (-1 for None), kept
    or counted now (``counts_in``): those behind from their last count, the others over
    the whole index, in one statement."""
    top, known = kept.top, kept.counts
    counts = [-1] * len(phrases)
    found: list[tuple[int, str, int]] = []  # (position, phrase, rows holding it now)
    counting: list[tuple[int, str, int]] = []  # (position, phrase, rows up to its last)
    marks: list[str] = []
    params: list[object] = []
    for i, phrase in enumerate(phrases):
        if phrase is None:
            continue
        last, n = known.get(phrase, (0, 0))
        if last == top:
            counts[i] = n
            continue
        start = _start(kept, phrase)
        if start is not None and start[0] == top:  # the store's common words, of now
            found.append((i, phrase, start[1]))
            continue
        at = len(params) + 1
        params.append(fts_phrase(phrase))
        if start is not None:
            marks.append(COUNT_ABOVE.format(m=at, n=at + 1))
            params.append(start[0])
            n = start[1]
        else:  # not kept, far behind, or of rows this snapshot does not hold
            marks.append(COUNT_ALL.format(m=at))
            n = 0
        counting.append((i, phrase, n))
    if marks:
        row = first(conn, "SELECT " + ", ".join(marks), params)
        assert row is not None
        found += [(i, phrase, n + int(more))
                  for (i, phrase, n), more in zip(counting, row, strict=True)]
    keep(kept, [(phrase, n) for _, phrase, n in found])
    for i, _, n in found:
        counts[i] = n
    return counts
