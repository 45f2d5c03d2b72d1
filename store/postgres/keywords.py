"""The derived keyword index of a PostgreSQL store: a Tantivy index of the turns'
lexemes that finds a store-wide search's candidates, which PostgreSQL then ranks.

Ranking every match of a common word does not scale: at 1,000,000 turns a store-wide
question matches hundreds of thousands of turns, and ``ts_rank`` of each took 1.3 s
(p50). Tantivy finds its top k with block-max WAND; its order is not PostgreSQL's, so it
only chooses candidates (``DEPTH`` times the ranked pool), and ``store.postgres.search``
ranks those as it ranks every match (``ts_rank`` and the IDFs), with the turns past the
index's watermark beside them. A caller's expression (phrases, prefixes, NEAR groups,
AND, OR, NOT) is read the same way without word order or distance, which the index
does not hold: its candidates then include turns that PostgreSQL does not match, and
more are read until enough do.

What the index holds and how it stays right:

* one document a turn: its exchange id and its lexemes as ``exchanges_fts.doc`` holds
  them (PostgreSQL's own parser, stemmer and stop words: the index has no tokenizer of
  its own), each as often as it occurs; in "all" every lexeme, in "own" those of the
  turn's own words (weight A);
* PostgreSQL stays the source of truth. Turn ids commit in id order (every writer takes
  the turn writers' lock before it draws one), so the index is the turns up to its
  largest id, its watermark; the turns past it (the hot tier) are matched through the
  GIN index beside the candidates, so a turn is searchable when its ingest returns;
* past HOT_LIMIT turns past the watermark, a search leaves the whole search to
  PostgreSQL and a thread of this process takes them in (``catch_up_later``); a bulk
  write takes them in itself past BULK_LIMIT (``PgStore.after_bulk_write``);
* a forget: PostgreSQL's ranking reads the turn's row, so a forgotten turn is never
  returned; the index that holds it is written again from the turns (a deleted entry
  would stay in its segment's files until a merge) by the forget's process at once
  (``PgStore.after_bulk_write``), by any other at its next search or catch-up (the
  ``forgotten`` table's tombstones; until then PostgreSQL answers that process's
  searches);
* the index lives in the process's data directory, named by the store's id; an index
  whose watermark lies beyond the store's largest turn (a database restored from an
  older copy) is written again from the turns. One process writes it at a time
  (Tantivy's writer lock); the others read what it commits.
"""

from __future__ import annotations

import contextlib
import math
import re
import shutil
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from store.errors import StoreError
from store.postgres.kept import STORE_ID, keyword_dir
from store.postgres.tsquery import Shape
from store.sql import Conn, all_rows, first

__all__ = ["ANSWERS_FROM", "DEPTH", "DerivedKeywords", "LexemeIndex", "Unit", "unit_terms"]

# The index answers a store-wide search from this many turns (the largest turn id); below,
# ranking every match costs less than the candidates' round trip (bench/scale.py: 50 ms
# store-wide at 20,000 turns, 175 ms at 100,000).
ANSWERS_FROM = 50_000
HOT_LIMIT = 2_000
BULK_LIMIT = 10_000
# Candidates: DEPTH x the ranked pool (POOL x limit) of Tantivy's best (FEED: at 1, 2, 4
# the top-100 overlap with ranking every match was 0.936, 0.969, 0.9997).
DEPTH = 4
ALL_SHARE = 2 / 3  # "all" and "own": a word of the turn's own words counts half again
PAGE = 10_000  # turns read in one statement when catching up
COMMIT_EVERY = 200_000  # turns between commits of a long catch-up (a rebuild)
HEAP = 64_000_000
RELOAD_EVERY_S = 1.0  # how stale another process's commits may be to this one's reader

# A turn's lexemes, each as often as it occurs (all, then those of its own words,
# weight A). Term counts bring Tantivy's order close to ts_rank's (bench, 100,000 turns,
# 100 store-wide questions, candidates 4 x the pool: top-10 the same for 100 of 100 and
# top-100 overlap 0.9997 with them; 0.978 and 0.895 with each lexeme once, which is
# cheaper to read: 15 s against 40 s for the 100,000 turns on a loaded machine).
# Both from one pass over the tsvector: two subqueries unnested it twice (the server's
# CPU at 400,000 turns, pages of 10,000: 62-73 us a turn against 46-48).
FEED = """
SELECT t.rowid, f.every, f.own
FROM exchanges_fts t CROSS JOIN LATERAL (
  SELECT string_agg(repeat(u.lexeme || ' ', greatest(cardinality(u.positions), 1)), '') AS every,
         string_agg(repeat(u.lexeme || ' ', cardinality(array_positions(u.weights, 'A'))), '')
           AS own
  FROM unnest(t.doc) AS u) AS f
WHERE t.rowid > ? ORDER BY t.rowid LIMIT ?"""
# The largest turn id given out: the newest turn's, or a forgotten newer one's.
LARGEST = """
SELECT greatest((SELECT max(rowid) FROM exchanges_fts), (SELECT max(exchange_id) FROM forgotten),
                0)"""
TOMBSTONES = "SELECT count(*) FROM forgotten"
PAST_WATERMARK = "SELECT rowid FROM exchanges_fts WHERE rowid > ? AND rowid <= ?"
# What a search checks before the index answers: the largest id and the tombstones.
ANSWER_STATE = f"SELECT ({LARGEST.strip()}), ({TOMBSTONES})"
FORGOTTEN = "SELECT exchange_id FROM forgotten WHERE exchange_id <= ?"
LEXEMES = "SELECT querytree(to_tsquery('english', v.t)) FROM unnest(?::text[]) AS v(t)"
# querytree's text of a unit: its lexemes as a phrase, each of the turn's own words (A)
# or of any column, whole or a prefix (*).
_OPERAND = re.compile(r"'((?:[^'\\\s]|'')+)'(?::(\*?)(A?))?")
_FOLLOWED_BY = re.compile(r" <(?:-|\d+)> ")
# A prefix that begins more lexemes than this is left to PostgreSQL.
MAX_EXPANSIONS = 256
TOMBSTONE_FILE = "tombstones"


class _Transactions(Protocol):
    def read(self) -> contextlib.AbstractContextManager[Conn]: ...


# A unit as the index reads it: its field ("own": the turn's own words, weight A; "all":
# any column) and its lexemes, each whole or a prefix (True).
Unit = tuple[str, tuple[tuple[str, bool], ...]]


def unit_terms(conn: Conn, units: Sequence[str]) -> list[Unit | None] | None:
    """Each unit's lexemes (``Unit``); None for a unit that matches nothing (stop words
    only). None when a unit is not a word, a prefix or a phrase of them, all of the
    turn's own words or all of any column (other columns): the index does not choose
    candidates for it."""
    out: list[Unit | None] = []
    for (tree,) in all_rows(conn, LEXEMES, (list(units),)):
        if str(tree) in ("", "T"):  # nothing left of it
            out.append(None)
            continue
        words, fields = [], set()
        for operand in _FOLLOWED_BY.split(str(tree)):
            found = _OPERAND.fullmatch(operand)
            if found is None:
                return None
            words.append((found.group(1).replace("''", "'"), bool(found.group(2))))
            fields.add("own" if found.group(3) else "all")
        if len(fields) != 1:
            return None
        out.append((fields.pop(), tuple(words)))
    return out


class LexemeIndex:
    """The Tantivy index in ``directory``; ``watermark``: the largest turn id it holds."""

    def __init__(self, directory: Path) -> None:
        import tantivy

        self._tv = tantivy
        self.directory = directory
        self._seen: int | None = None  # tombstones the index was last written with (knows)
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        b = tantivy.SchemaBuilder()
        b.add_text_field("all", tokenizer_name="lexemes", index_option="freq")
        b.add_text_field("own", tokenizer_name="lexemes", index_option="freq")
        b.add_unsigned_field("id", indexed=True, fast=True)
        self.schema = b.build()
        try:
            self.index = tantivy.Index(self.schema, path=str(directory), reuse=True)
        except ValueError:  # another layout: written again
            shutil.rmtree(directory)
            directory.mkdir(mode=0o700)
            self.index = tantivy.Index(self.schema, path=str(directory), reuse=True)
        self.index.register_tokenizer(
            "lexemes", tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build())
        self.index.config_reader(reload_policy="Manual")
        self._view = self._searched()
        self._reloaded = time.monotonic()

    def _searched(self) -> tuple[Any, int]:
        """A searcher and the largest turn id it holds."""
        searcher = self.index.searcher()
        hits = searcher.search(self._tv.Query.all_query(), 1, count=False,
                               order_by_field="id").hits
        return searcher, int(hits[0][0]) if hits else 0

    @property
    def watermark(self) -> int:
        """The largest turn id the index holds (every turn up to it is in)."""
        return self._view[1]

    def reload(self, *, at_most_every: float = 0.0) -> None:
        """See what any process committed (not more often than ``at_most_every`` s)."""
        now = time.monotonic()
        if now - self._reloaded >= at_most_every:
            self.index.reload()
            self._view = self._searched()
            self._reloaded = now

    def tombstones_seen(self) -> int:
        try:
            return int((self.directory / TOMBSTONE_FILE).read_text())
        except (OSError, ValueError):
            return -1

    def knows(self, tombstones: int) -> bool:
        """Whether the index was written after the forgotten table held ``tombstones``
        rows: the count last read is kept, and the file (which any process of this data
        directory writes) read again only when they differ, not at every search."""
        if self._seen != tombstones:
            self._seen = self.tombstones_seen()
        return self._seen == tombstones

    def catch_up(self, store: _Transactions, stop: Callable[[], bool] = lambda: False,
                 *, rewrite: bool = False, beside: bool = False) -> int:
        """Take in the turns past the watermark and delete the entries of turns
        forgotten since the last time; how many turns (0 also when another process is
        writing the index). ``rewrite``: every turn written again (``stenographer index
        rebuild``); StoreError when another process is writing the index. ``beside``:
        on a thread beside this process's searches, which it lets run between two
        turns."""
        try:
            writer = self.index.writer(heap_size=HEAP, num_threads=1)
        except ValueError:
            if rewrite:
                raise StoreError("another process is writing the derived keyword index "
                                 f"({self.directory}); try again when it is done") from None
            return 0  # another process or thread is writing it
        added = 0
        try:
            self.reload()
            with store.read() as conn:
                largest = int(first(conn, LARGEST)[0])  # type: ignore[index]
                tombstones = int(first(conn, TOMBSTONES)[0])  # type: ignore[index]
                gone: list[int] = []
                top = self.watermark
                if tombstones != self.tombstones_seen():
                    gone = [int(r[0]) for r in all_rows(conn, FORGOTTEN, (top,))]
            searcher = self._view[0]
            if rewrite or top > largest or any(searcher.search(self._tv.Query.term_query(
                    self.schema, "id", i), 1, count=True).count for i in gone):
                # Not this store's history (a restored older copy), or it holds a turn
                # forgotten since: written again. A deleted entry would stay in its
                # segment's files until a merge; the old segments' files go with them.
                writer.delete_all_documents()
                top = 0
            since_commit = 0
            while True:
                with store.read() as conn:
                    rows = all_rows(conn, FEED, (top, PAGE))
                for exchange_id, every, own in rows:
                    doc = self._tv.Document()
                    doc.add_unsigned("id", int(exchange_id))
                    doc.add_text("all", str(every or ""))
                    doc.add_text("own", str(own or ""))
                    writer.add_document(doc)
                    if beside:
                        # A search waiting for the interpreter would otherwise wait out
                        # its switch interval (5 ms). Not in a bulk writer's own thread:
                        # a sleep(0) is a system call that sleeps for the timer slack
                        # (~80 us here), several times what a turn's document takes.
                        time.sleep(0)
                added += len(rows)
                since_commit += len(rows)
                if rows:
                    top = int(rows[-1][0])
                last = len(rows) < PAGE or stop()
                if since_commit >= COMMIT_EVERY or last:
                    writer.commit()
                    since_commit = 0
                if last:
                    break
            (self.directory / TOMBSTONE_FILE).write_text(str(tombstones))
            self._seen = tombstones
        finally:
            writer.wait_merging_threads()
            self.reload()
        return added

    def trusted(self, conn: Conn) -> bool:
        """Whether the index is of this store's history (its watermark not beyond the
        store's largest turn id); the audit's view."""
        self.reload()
        return self.watermark <= int(first(conn, LARGEST)[0])  # type: ignore[index]

    def audit_ids(self, conn: Conn, lo: int, hi: int, session_id: int | None, expect: int
                  ) -> tuple[set[int], set[int]]:
        """(ids the index holds in (lo, hi], ids of turns there past its watermark, which
        searches match in PostgreSQL); ``expect``: about how many it should hold. The
        index holds no sessions: a session's audit gets every id of the range."""
        from store.keyword_index import every_id

        searcher, watermark = self._view
        query = self._tv.Query.range_query(self.schema, "id", self._tv.FieldType.Unsigned,
                                           max(lo, 0), hi, include_lower=False,
                                           include_upper=True)
        held = every_id(searcher, query, expect)
        past = {int(r[0]) for r in all_rows(conn, PAST_WATERMARK, (max(lo, watermark), hi))}
        return held, past

    def candidates(self, units: Sequence[Unit | None], idfs: Sequence[float], count: int,
                   shape: Shape | None = None) -> tuple[list[int], int, bool] | None:
        """The ids of Tantivy's best ``count`` turns of ``shape`` (``store.postgres.tsquery``:
        which units a match needs; by default any one of them), the watermark of the
        index they were read from, and whether there may be more; None when a prefix
        begins more than MAX_EXPANSIONS lexemes (PostgreSQL answers).

        Each word is weighed by the IDF PostgreSQL's ranking gives its unit (``idfs``),
        shared among the unit's words, in place of Tantivy's own, and scored in "all"
        and, half again, in "own" (``ts_rank`` weighs the context's words half), also
        when the unit asks for the turn's own words only. A phrase's words are required
        in any order (the index holds no positions) and a prefix stands for each lexeme
        it begins. None of it checks word order or distance: PostgreSQL matches the
        candidates again."""
        searcher, watermark = self._view
        n = int(searcher.num_docs)
        if shape is None:
            shape = ("|", tuple(range(len(units))))
        try:
            clauses = _Shaped(self, searcher, n, units, idfs).clauses(shape)
        except _TooWide:
            return None
        if not clauses:  # nothing has it
            return [], watermark, False
        query = self._tv.Query.boolean_query(clauses)
        found = searcher.search(query, count, count=False).hits
        ids = searcher.fast_field_values("id", [a for _, a in found])
        return [int(i) for i in ids], watermark, len(found) == count


class _TooWide(Exception):
    """A prefix begins more than MAX_EXPANSIONS lexemes."""


class _Shaped:
    """The Tantivy query of a shape over units (``LexemeIndex.candidates``)."""

    def __init__(self, index: LexemeIndex, searcher: Any, n: int,
                 units: Sequence[Unit | None], idfs: Sequence[float]) -> None:
        self.q, self.occur = index._tv.Query, index._tv.Occur
        self.schema, self.searcher, self.n = index.schema, searcher, n
        self.units, self.idfs = units, idfs

    def clauses(self, shape: Shape) -> list[tuple[Any, Any]] | None:
        """Boolean clauses that match the turns of ``shape``: [] when it needs nothing
        (only stop words), None when nothing has it. In an OR a word stands as its
        scored clauses alone (Should), so an OR of words is one flat query that
        Tantivy's block-max WAND reads; a word of the turn's own words then also
        matches a turn holding it elsewhere (PostgreSQL matches again), and scores in
        every turn that holds it, as ``ts_rank`` does in every turn the OR matches."""
        if isinstance(shape, int):
            return self._unit(shape)
        op, parts = shape
        if op == "|":
            out: list[tuple[Any, Any]] = []
            for part in parts:
                clauses = self.clauses(part)
                if clauses is None:
                    continue
                should = [c for c in clauses if c[0] == self.occur.Should]
                if len(should) == len(clauses) or self._one_word(part):
                    out += should
                else:
                    out.append((self.occur.Should, self.q.boolean_query(clauses)))
            return out or None
        required: list[tuple[Any, Any]] = []
        for part in parts:
            clauses = self.clauses(part)
            if clauses is None:
                return None
            if clauses:
                required.append((self.occur.Must, self.q.boolean_query(clauses)))
        return required

    def _one_word(self, shape: Shape) -> bool:
        unit = self.units[shape] if isinstance(shape, int) else None
        return unit is not None and len(unit[1]) == 1

    def _unit(self, at: int) -> list[tuple[Any, Any]] | None:
        unit = self.units[at]
        if unit is None:
            return []
        field, words = unit
        weight = self.idfs[at] / len(words)
        if len(words) == 1:
            return self._word(field, *words[0], weight)
        required = []
        for word in words:
            clauses = self._word(field, *word, weight)
            if clauses is None:
                return None
            required.append((self.occur.Must, self.q.boolean_query(clauses)))
        return required

    def _word(self, field: str, lexeme: str, prefix: bool, weight: float
              ) -> list[tuple[Any, Any]] | None:
        """Clauses that match the turns holding ``lexeme`` (a lexeme it begins) in
        ``field``, scored as a word anywhere (``ts_rank`` counts every position of a
        lexeme whatever the query's weights, and divides by the whole turn's length:
        "own" holds only the turn's own words); None when no turn holds it."""
        lexemes = [lexeme]
        if prefix:
            found = self.searcher.terms_with_prefix(field, lexeme, limit=MAX_EXPANSIONS + 1)
            if len(found) > MAX_EXPANSIONS:
                raise _TooWide
            lexemes = [str(t) for t, _ in found]
        scored = [clause for each in lexemes for name, share in (("all", ALL_SHARE),
                                                                 ("own", 1.0 - ALL_SHARE))
                  if (clause := self._scored(name, each, share * weight)) is not None]
        if field == "all" or not scored:
            return scored or None
        own = [(self.occur.Should, self.q.const_score_query(
            self.q.term_query(self.schema, "own", each), 0.0)) for each in lexemes]
        return [(self.occur.Must, self.q.boolean_query(own)), *scored]

    def _scored(self, name: str, lexeme: str, weight: float) -> tuple[Any, Any] | None:
        """A Should clause of ``lexeme`` in ``name``, its IDF ``weight`` in place of
        Tantivy's own; None when no turn holds it there."""
        df = min(int(self.searcher.doc_freq(name, lexeme)), self.n)
        if df == 0:
            return None
        own_idf = math.log(1.0 + (self.n - df + 0.5) / (df + 0.5))
        return (self.occur.Should, self.q.boost_query(
            self.q.term_query(self.schema, name, lexeme), weight / own_idf))


class DerivedKeywords:
    """A PostgreSQL store's derived keyword index, opened when the store first reaches
    ANSWERS_FROM turns (a smaller store never imports Tantivy)."""

    def __init__(self, store: _Transactions, data_dir: Path) -> None:
        self.store = store
        self.data_dir = data_dir
        self._index: LexemeIndex | None = None
        self._failed = False
        self._lock = threading.Lock()
        self._catching: threading.Thread | None = None
        self._stopping = threading.Event()

    def _directory(self, conn: Conn) -> Path:
        """The index's directory, named by the store's id."""
        row = first(conn, STORE_ID)
        return keyword_dir(self.data_dir, str(row[0]) if row is not None else "store")

    def _opened(self, conn: Conn) -> LexemeIndex | None:
        if self._index is None and not self._failed:
            with self._lock:
                if self._index is None and not self._failed:
                    try:
                        self._index = LexemeIndex(self._directory(conn))
                    except (OSError, ValueError, ImportError) as ex:
                        self._failed = True  # PostgreSQL answers every search
                        print(f"stenographer: the derived keyword index could not be "
                              f"opened: {ex}", file=sys.stderr)
        return self._index

    def answering(self, conn: Conn) -> LexemeIndex | None:
        """The index, when it should choose a store-wide search's candidates in
        ``conn``'s snapshot: a large store, at most HOT_LIMIT turns past its watermark
        (more: a thread takes them in, and PostgreSQL answers meanwhile)."""
        state = first(conn, ANSWER_STATE)
        assert state is not None
        largest, tombstones = int(state[0]), int(state[1])
        if largest < ANSWERS_FROM:
            return None
        index = self._opened(conn)
        if index is None:
            return None
        if largest - index.watermark > 0:
            index.reload(at_most_every=RELOAD_EVERY_S)
        if (largest - index.watermark > HOT_LIMIT or index.watermark > largest
                or not index.knows(tombstones)):
            # behind, not this store's history, or a turn was forgotten since it was
            # written (by any process): written again on a thread, PostgreSQL answers
            self.catch_up_later()
            return None
        return index

    def audited(self) -> LexemeIndex | None:
        """The index for the contract audit: None while the store has never had one
        (below ANSWERS_FROM, nothing was written)."""
        with self.store.read() as conn:
            if self._index is None and not self._directory(conn).exists():
                return None
            return self._opened(conn)

    def rebuild(self) -> tuple[int, Path | None]:
        """Write the index again from every stored turn, whatever the store's size;
        (turns written, the index's directory). StoreError: another process is writing
        it."""
        with self.store.read() as conn:
            index = self._opened(conn)
        if index is None:
            return 0, None
        return index.catch_up(self.store, rewrite=True), index.directory

    def catch_up(self, *, beyond: int = 0) -> int:
        """Take in the turns past the watermark now when more than ``beyond`` are (a
        bulk write: BULK_LIMIT), and write the index again when it holds a turn
        forgotten since it last did; how many turns it took in. On the thread that
        ``catch_up_later`` starts, it lets this process's searches run between turns."""
        with self.store.read() as conn:
            largest = int(first(conn, LARGEST)[0])  # type: ignore[index]
            if largest < ANSWERS_FROM and self._index is None:
                return 0
            index = self._opened(conn)
            if index is None:
                return 0
            forgotten = int(first(conn, TOMBSTONES)[0])  # type: ignore[index]
        if largest - index.watermark <= beyond and index.knows(forgotten):
            return 0
        try:
            return index.catch_up(self.store, self._stopping.is_set,
                                  beside=threading.current_thread() is self._catching)
        except (OSError, ValueError) as ex:  # tantivy reports I/O as ValueError
            print(f"stenographer: the derived keyword index did not catch up: {ex}",
                  file=sys.stderr)
            return 0

    def catch_up_later(self) -> None:
        """``catch_up`` on a thread of its own (one at a time)."""
        with self._lock:
            if self._catching is not None and self._catching.is_alive():
                return
            self._catching = threading.Thread(target=self.catch_up, name="keyword-catch-up",
                                              daemon=True)
            self._catching.start()

    def wait(self) -> None:
        """Until a catch-up started by ``catch_up_later`` has ended (it stops after the
        page it is on: what it took in is committed, the rest waits for the next)."""
        catching = self._catching
        if catching is not None:
            self._stopping.set()
            catching.join()
            self._stopping.clear()
