"""The document frequencies kept between searches (store/sqlite/doc_freq.py): a search
that is handed them ranks with bm25()'s rows and bm25()'s doubles while the store
changes between searches (ingests, a forget and the neighbours it indexes again, an
import, another process's writes, a row indexed again under its id), because every
write but an append raises the keyword index's epoch in its own transaction. Real store
files, the real graphs, a real second process."""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
from array import array
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import apsw
import pytest

from nodes.extract.query_terms import term_expression
from stenographer.app import App, open_app
from stenographer.settings import Settings
from store.keyword_syntax import plain_phrases
from store.search_filter import BM25_WEIGHTS, HitFilter
from store.sql import Conn, all_rows, first
from store.sqlite import doc_freq, search
from store.sqlite.schema import EPOCH_KEY
from tests.schema_stores import store_at_schema

REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")
WORDS = ["redis", "cache", "parser", "deploy", "timeout", "schema", "migration", "token",
         "vector", "index", "queue", "worker", "shard", "replica", "latency", "budget"]
EPOCH = f"SELECT value FROM meta WHERE key = '{EPOCH_KEY}'"
WEIGHTS = ", ".join(str(w) for w in BM25_WEIGHTS)


def _text(rng: random.Random) -> str:
    picked = [rng.choice(WORDS[: rng.randint(3, len(WORDS))]) for _ in range(rng.randint(2, 9))]
    return "We looked at the " + " and the ".join(picked) + "."


def _ingest(app: App, rng: random.Random, count: int) -> list[int]:
    ids = []
    for _ in range(count):
        out, _ = app.run("ingest", {"role": rng.choice(["user", "assistant"]),
                                    "content": _text(rng), "session_id": rng.choice("abc")})
        ids.append(int(out["reply"]["exchange_id"]))
    return ids


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    opened = open_app(Settings(data_dir=tmp_path / "a", turn_limit=1_000))
    try:
        yield opened
    finally:
        opened.close()


def _epoch_in(conn: Conn) -> int:
    row = first(conn, EPOCH)
    assert row is not None
    return int(row[0])


def _epoch(app: App) -> int:
    with app.store.read() as conn:
        return _epoch_in(conn)


SIZED = ("SELECT rowid, {f} FROM exchanges_fts WHERE exchanges_fts MATCH ?1"
         " ORDER BY rowid")


def _ranked(conn: apsw.Connection, match: str, blob: bytes | None = None
            ) -> list[tuple[object, ...]]:
    """Every matching row and its value: bm25()'s, or bm25_top's handed ``blob``."""
    f = (f"bm25(exchanges_fts, {WEIGHTS})" if blob is None
         else f"bm25_top(exchanges_fts, 1000, {WEIGHTS}, ?2)")
    return [tuple(r) for r in all_rows(conn, SIZED.format(f=f),
                                       (match,) if blob is None else (match, blob))]


def _searches_are_bm25s(app: App, monkeypatch: pytest.MonkeyPatch, rng: random.Random
                        ) -> int:
    """Searches of every scope, handed the kept counts, against the same searches ranked
    by FTS5's bm25() (an install without bm25_top): the same ids and the same doubles.
    How many were handed counts."""
    with app.store.read() as conn:
        sessions = [int(r[0]) for r in all_rows(conn, "SELECT id FROM sessions")]
    handed = 0
    for _ in range(12):
        expression = term_expression(" ".join(rng.sample(WORDS, rng.randint(1, 5))))
        assert expression is not None
        phrases = plain_phrases(expression)
        assert phrases is not None
        for flt in (HitFilter(), HitFilter(session_id=rng.choice(sessions)),
                    HitFilter(session_id=rng.choice(sessions), compressed_only=True)):
            with app.store.read() as conn:
                got = search.keyword_hits(conn, expression, flt, 15)
                scope: list[str | None] = [] if flt.session_id is None else [None]
                handed += doc_freq.phrase_counts(conn, [*scope, *phrases]) is not None
                with monkeypatch.context() as m:
                    m.setattr(search, "bm25_top_path", lambda: None)
                    plain = search.keyword_hits(conn, expression, flt, 15)
            assert got == plain, (expression, flt)
    return handed


def test_searches_stay_bm25s_while_the_store_changes(app: App, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch):
    rng = random.Random(4)
    ids = _ingest(app, rng, 60)
    assert _searches_are_bm25s(app, monkeypatch, rng) == 36
    epoch = _epoch(app)

    _ingest(app, rng, 15)  # appends: counted above the last rowid, the epoch unchanged
    assert _searches_are_bm25s(app, monkeypatch, rng) == 36
    assert _epoch(app) == epoch

    out, _ = app.run("forget", {"exchange_ids": [ids[5], ids[30]], "confirm": True})
    assert out["reply"]["count"] == 2 and out["reply"]["reindexed"] > 0
    assert _epoch(app) > epoch
    epoch = _epoch(app)
    assert _searches_are_bm25s(app, monkeypatch, rng) == 36

    # an import: another store's turns, exported and imported through the graphs
    other = open_app(Settings(data_dir=tmp_path / "b", turn_limit=1_000))
    try:
        _ingest(other, random.Random(9), 20)
        bundle = tmp_path / "b.zst"
        other.run("sync_export", {"path": str(bundle)})
    finally:
        other.close()
    out, _ = app.run("sync_import", {"path": str(bundle)})
    assert out["reply"]["applied"] == 20, out["reply"]
    assert _searches_are_bm25s(app, monkeypatch, rng) == 36

    # another process writes the file: appends, a turn indexed again under its id with
    # other words, and a row written below the largest rowid without a removal (the
    # forgotten turn's id), which no count of this process's could see
    script = textwrap.dedent(f"""
        from stenographer.app import open_app
        from stenographer.settings import Settings
        app = open_app(Settings(data_dir={str(tmp_path / "a")!r}, turn_limit=1_000))
        for i in range(10):
            app.run("ingest", {{"role": "user", "content": "the shard replica token " * (i + 1),
                                "session_id": "c"}})
        with app.store.write() as conn:
            conn.execute("DELETE FROM exchanges_fts WHERE rowid = ?", ({ids[10]},))
            conn.execute("INSERT INTO exchanges_fts(rowid, body, context, dated, scope)"
                         " VALUES (?, 'redis redis redis shard', '', '', 's1')", ({ids[10]},))
        with app.store.write() as conn:
            conn.execute("INSERT INTO exchanges_fts(rowid, body, context, dated, scope)"
                         " VALUES (?, 'budget latency queue', '', '', 's1')", ({ids[5]},))
        app.close()
        """)
    subprocess.run([sys.executable, "-c", script], cwd=REPO, check=True, timeout=120)
    assert _epoch(app) > epoch
    assert _searches_are_bm25s(app, monkeypatch, rng) == 36

    # alone: a row written below the largest rowid, without a removal (the epoch stays)
    epoch = _epoch(app)
    with app.store.write() as conn:
        conn.execute("INSERT INTO exchanges_fts(rowid, body, context, dated, scope)"
                     " VALUES (?, 'budget latency queue shard', '', '', 's1')", (ids[30],))
    assert _epoch(app) == epoch
    assert _searches_are_bm25s(app, monkeypatch, rng) == 36


def test_every_removal_raises_the_epoch(app: App):
    """Whatever writes the index (here plain SQL on FTS5's table): a removal, a row
    indexed again under its id, the removal of every row raise it, in the writing
    transaction (a rolled back one leaves it); appends, merges and a row written below
    the largest rowid do not (the kept counts see that one by the row count)."""
    insert = ("INSERT INTO exchanges_fts(rowid, body, context, dated, scope)"
              " VALUES (?, 'redis cache', '', '', 's1')")
    steps = [
        ("append", [(insert, (10,)), (insert, (11,)), (insert, (20,))], False),
        ("merge", [("INSERT INTO exchanges_fts(exchanges_fts, rank) VALUES ('merge', -64)",
                    ())], False),
        ("optimize", [("INSERT INTO exchanges_fts(exchanges_fts) VALUES ('optimize')", ())],
         False),
        ("remove", [("DELETE FROM exchanges_fts WHERE rowid = 11", ())], True),
        ("below the largest", [(insert, (15,))], False),
        ("again under its id", [("DELETE FROM exchanges_fts WHERE rowid = 20", ()),
                                (insert, (20,))], True),
        ("every row", [("DELETE FROM exchanges_fts", ())], True),
    ]
    for name, statements, raises in steps:
        before = _epoch(app)
        with app.store.write() as conn:
            for sql, params in statements:
                conn.execute(sql, params)
        assert (_epoch(app) > before) == raises, name
    before = _epoch(app)
    with pytest.raises(RuntimeError), app.store.write() as conn:
        conn.execute(insert, (5,))
        conn.execute("DELETE FROM exchanges_fts WHERE rowid = 10")
        raise RuntimeError("rolled back")
    assert _epoch(app) == before


def test_a_migrated_store_gains_the_epoch(tmp_path: Path):
    """A store of the schema before (no triggers, no epoch: as the code before made it)
    gains both when it is opened."""
    conn = store_at_schema(tmp_path / "old" / "steno.db", 15)
    conn.execute(f"DROP TRIGGER exchanges_fts_removed; DELETE FROM meta WHERE key = '{EPOCH_KEY}'")
    triggers = "SELECT count(*) FROM sqlite_schema WHERE type = 'trigger'"
    conn.close()
    opened = open_app(Settings(data_dir=tmp_path / "old"))
    try:
        with opened.store.read() as new:
            assert first(new, triggers) == (1,) and first(new, EPOCH) is not None
    finally:
        opened.close()


def test_the_ranking_function_uses_the_counts_it_is_given_and_only_those(app: App):
    """Counts for the table's row count are used (a wrong one moves the scores); counts
    of another row count, or of another number of phrases, are not (bm25()'s values)."""
    for i in range(40):
        app.run("ingest", {"role": "user", "session_id": "a", "content":
                           f"turn {i}: the latency{' budget' * (i % 3) if i % 5 == 0 else ''}"})
    match = '"budget" OR "latency"'
    with app.store.read() as conn:
        assert isinstance(conn, apsw.Connection)
        plain = _ranked(conn, match)
        given = doc_freq.phrase_counts(conn, ["budget", "latency"])
        assert given is not None
        rows, epoch, budget, latency = array("q", given)
        assert epoch == _epoch_in(conn)
        assert 0 < budget < rows / 2 and len(plain) > 3  # an IDF above bm25()'s floor

        def ranked(counts: list[int]) -> list[tuple[object, ...]]:
            return _ranked(conn, match, array("q", counts).tobytes())

        assert ranked([rows, epoch, budget, latency]) == plain
        assert ranked([rows, epoch, -1, latency]) == plain  # -1: counted by FTS5
        assert ranked([rows, epoch, budget + 3, latency]) != plain
        assert ranked([rows + 1, epoch, budget + 3, latency]) == plain  # another snapshot's
        assert ranked([rows, epoch, budget + 3]) == plain  # not this statement's phrases


def test_row_sizes_are_kept_for_one_epoch(app: App):
    """The ranking function keeps the rows' sizes it read, per connection, under the
    epoch it is handed: a row indexed again with other words (its size changed) is
    ranked by its new size once the epoch its removal raised is handed over; handed the
    old epoch, the old size kept for the row shows, which is how the sizes are known to
    be kept and keyed by the epoch."""
    for i in range(30):
        app.run("ingest", {"role": "user", "session_id": "a",
                           "content": f"turn {i}: the latency budget" + " word" * (i % 7)})
    match = '"latency" OR "budget"'
    with app.store.read() as conn:
        assert isinstance(conn, apsw.Connection)
        given = doc_freq.phrase_counts(conn, ["latency", "budget"])
        assert given is not None
        rows, epoch, latency, budget = array("q", given)
        before = _ranked(conn, match, given)
        assert before == _ranked(conn, match)  # the sizes read, and kept
        row = int(before[3][0])
    with app.store.write() as conn:  # the row indexed again, with more words
        conn.execute("DELETE FROM exchanges_fts WHERE rowid = ?", (row,))
        conn.execute("INSERT INTO exchanges_fts(rowid, body, context, dated, scope)"
                     " VALUES (?, ?, '', '', '')",
                     (row, "the latency budget " + "other words " * 12))
    with app.store.read() as conn:
        assert isinstance(conn, apsw.Connection)
        assert _epoch_in(conn) > epoch
        plain = _ranked(conn, match)
        stale = array("q", [rows, epoch, latency, budget]).tobytes()
        moved, now = dict(_ranked(conn, match, stale)), dict(plain)
        assert moved.pop(row) != now.pop(row)  # the size kept under the old epoch
        assert moved == now
        given = doc_freq.phrase_counts(conn, ["latency", "budget"])
        assert given is not None
        assert _ranked(conn, match, given) == plain  # the new epoch: sizes read again
        assert _ranked(conn, match, given) == plain  # and kept


def _in_new_thread(work: Callable[[], T]) -> T:
    """``work`` on a thread of its own: a new connection, which keeps no count yet."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(work).result()


def _whole_counts(app: App, monkeypatch: pytest.MonkeyPatch, expressions: list[str]) -> int:
    """Phrases counted over the whole index (not above a rowid), for a new connection's
    searches of ``expressions`` in every session."""
    counted: list[int] = []
    real = doc_freq.first

    def counting(conn: Conn, sql: str, *args: object) -> object:
        counted.append(sql.count("MATCH") - sql.count("AND rowid >"))
        return real(conn, sql, *args)  # type: ignore[arg-type]

    def searches() -> None:
        with app.store.read() as conn:
            for expression in expressions:
                search.keyword_hits(conn, expression, HitFilter(), 10)

    with monkeypatch.context() as m:
        m.setattr(doc_freq, "first", counting)
        _in_new_thread(searches)
    return sum(counted)


def test_a_servers_common_words_give_the_counts_fts5_would(app: App,
                                                           monkeypatch: pytest.MonkeyPatch):
    """A server (``serves``) reads the index's common words on its upkeep thread; a search
    then takes the count of a word it keeps none of from them, brought up to date over
    the rows added since, instead of counting it over the whole index, and ranks as
    bm25() does. A removal since (a forget) or a row written below their largest rowid
    leaves them unused, the searches as exact, until the upkeep reads them again."""
    monkeypatch.setattr(search, "MERGE_FROM", 1)  # a small store keeps them too
    monkeypatch.setattr(doc_freq, "COMMON_ROWS", 1)  # every word of it
    rng = random.Random(11)
    ids = _ingest(app, rng, 60)
    with app.store.read() as conn:  # a word no turn holds is no common word: counted
        held = [w for w in WORDS if first(conn, "SELECT count(*) FROM exchanges_fts"
                                          " WHERE exchanges_fts MATCH ?", (w,)) != (0,)]
    assert len(held) > 10
    words = [term_expression(word) for word in held]
    expressions = [e for e in words if e is not None]

    def exact() -> int:
        return _in_new_thread(lambda: _searches_are_bm25s(app, monkeypatch, rng))

    def read_again() -> None:
        with app.store.read() as conn:
            app.store.searched_keywords(conn)  # as a search does: the upkeep reads them
        app.store.upkeep.wait()

    assert _whole_counts(app, monkeypatch, expressions) == len(expressions)  # no server
    read_again()  # nothing to read: the process is no server
    assert _whole_counts(app, monkeypatch, expressions) == len(expressions)
    app.store.serves()
    read_again()  # the first search finds them due
    assert _whole_counts(app, monkeypatch, expressions) == 0
    with app.store.read() as conn:
        assert isinstance(conn, apsw.Connection)
        kept = doc_freq.snapshot(conn)
        assert kept is not None and doc_freq.uncounted(kept, held) == []
        # a phrase of two words is no word of theirs: FTS5 counts it
        assert doc_freq.uncounted(kept, ["redis cache"]) == ["redis cache"]
    assert exact() == 36

    _ingest(app, rng, 15)  # appends: the words' counts brought up to date, not read again
    read_again()
    assert _whole_counts(app, monkeypatch, expressions) == 0
    assert exact() == 36

    out, _ = app.run("forget", {"exchange_ids": [ids[5]], "confirm": True})
    assert out["reply"]["count"] == 1
    assert _whole_counts(app, monkeypatch, expressions) == len(expressions)  # unused
    assert exact() == 36
    read_again()  # a search found them stale
    assert _whole_counts(app, monkeypatch, expressions) == 0
    assert exact() == 36

    with app.store.write() as conn:  # below their largest rowid, the epoch unchanged
        conn.execute("INSERT INTO exchanges_fts(rowid, body, context, dated, scope)"
                     " VALUES (?, 'budget latency queue shard', '', '', 's1')", (ids[5],))
    assert _whole_counts(app, monkeypatch, expressions) == len(expressions)
    assert exact() == 36
    read_again()
    assert _whole_counts(app, monkeypatch, expressions) == 0
    assert exact() == 36
