"""bm25_top (store/sqlite/bm25_top.c): FTS5's bm25() for the rows that can be among a
statement's best k, without reading the others' sizes. The best k and their values must
be bm25()'s, on a real store file with the extension loaded as the store loads it."""

from __future__ import annotations

import math
import random
from array import array
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from store.db import Store
from store.search import HitFilter
from store.search_filter import BM25_WEIGHTS, POOL
from store.sql import all_rows
from store.sqlite import bm25_top_path, search
from store.sqlite.search import (
    common_left,
    keyword_sql,
    match_expression,
    ranked,
    scope_token,
)

WEIGHTS = ", ".join(str(w) for w in BM25_WEIGHTS)
VOCAB = [f"w{i}" for i in range(40)]
INSERT = "INSERT INTO exchanges_fts(rowid, body, context, dated, scope) VALUES (?, ?, ?, ?, ?)"


def test_the_ranking_function_is_built_where_the_tests_run():
    """``make`` builds it (setup.py; the Makefile installs SQLite's headers as root on
    Debian): the tests and the benchmarks measure the compiled path, not the fallback."""
    assert bm25_top_path() is not None, "store/sqlite/bm25_top.c was not built"


def _text(rng: random.Random, words: int) -> str:
    # skewed: a few common words, many rare ones, so scores spread and some rows tie
    return " ".join(VOCAB[min(int(rng.expovariate(0.15)), len(VOCAB) - 1)]
                    for _ in range(words))


def _add(store: Store, rng: random.Random, first: int, count: int) -> None:
    with store.write() as conn:
        for rowid in range(first, first + count):
            conn.execute(INSERT, (rowid, _text(rng, rng.randint(1, 30)), _text(rng, 10),
                                  "march 2026", scope_token(1 + rowid % 3)))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    db = Store(tmp_path / "steno.db")
    _add(db, random.Random(5), 1, 600)
    yield db
    db.close()


def _best(conn: apsw.Connection, function: str, match: str, k: int) -> list[tuple[int, float]]:
    k_arg = f"{k}, " if function == "bm25_top" else ""
    sql = (f"SELECT rowid, {function}(exchanges_fts, {k_arg}{WEIGHTS}) AS raw"
           " FROM exchanges_fts WHERE exchanges_fts MATCH ? ORDER BY raw LIMIT ?")
    return [(int(r[0]), float(r[1])) for r in all_rows(conn, sql, (match, k))]


def _queries(rng: random.Random) -> list[str]:
    out = []
    for _ in range(25):
        words = rng.sample(VOCAB[:25], rng.randint(1, 5))
        expression = " OR ".join(f'"{w}"' for w in words)
        session = rng.choice([None, 1, 2, 3])
        out.append(match_expression(expression, HitFilter(session_id=session)))
    return out


def test_the_best_k_and_their_values_are_bm25s(store: Store):
    rng = random.Random(11)
    pruned = 0
    for round_ in range(3):  # the store changes between rounds: nothing is kept across
        with store.read() as conn:
            for match in _queries(rng):
                for k in (1, 7, 40, 1000):
                    assert _best(conn, "bm25_top", match, k) == _best(conn, "bm25", match, k)
                every = all_rows(conn, f"SELECT bm25_top(exchanges_fts, 7, {WEIGHTS})"
                                 " FROM exchanges_fts WHERE exchanges_fts MATCH ?", (match,))
                pruned += sum(r[0] == 1.0 for r in every)
        _add(store, rng, 1000 + 100 * round_, 50)
        with store.write() as conn:
            conn.execute("DELETE FROM exchanges_fts WHERE rowid = ?", (10 + round_,))
    assert pruned > 0  # rows outside the best were left unscored, so the bound was used


def _with_lengths(store: Store, rng: random.Random) -> None:
    """The length prior reads the turns' content: a temporary table in front of the
    store's (empty) one holds the fixture's rows' lengths."""
    with store.write() as conn:
        conn.execute("CREATE TEMP TABLE exchanges(id INTEGER PRIMARY KEY, content TEXT)")
        conn.executemany("INSERT INTO temp.exchanges VALUES (?, ?)",
                         [(i, "x" * rng.randint(1, 900)) for i in range(1, 601)])


def test_the_search_statement_is_bm25s(store: Store, monkeypatch: pytest.MonkeyPatch):
    """keyword_sql with bm25_top gives what the same statement gives with bm25(), the
    statement of an install where bm25_top could not be built."""
    rng = random.Random(3)
    _with_lengths(store, rng)
    with store.read() as conn:
        for match in _queries(rng):
            sql, params = keyword_sql(HitFilter())
            assert "bm25_top(" in sql
            plain = sql.replace(f"bm25_top(exchanges_fts, ?2 * 2, {WEIGHTS})",
                                f"bm25(exchanges_fts, {WEIGHTS})")
            monkeypatch.setattr(search, "bm25_top_path", lambda: None)
            assert keyword_sql(HitFilter())[0] == plain  # an install that could not build it
            monkeypatch.undo()
            for limit in (3, 20):
                got = all_rows(conn, sql, (match, limit, *params))
                assert got == all_rows(conn, plain, (match, limit, *params))
                assert limit <= len(got) <= POOL * limit
                assert len(ranked(conn, got, limit, {})) == limit


def test_a_negative_weight_scores_every_row_as_bm25_does(store: Store):
    """With a negative weight a score need not fall as a row grows: no row is left out
    (with the bound, most of these rows would get 1.0), the values stay bm25()'s."""
    sql = ("SELECT rowid, {f}(exchanges_fts, {k}1.0, -0.5, 1.0, 0.0) FROM exchanges_fts"
           " WHERE exchanges_fts MATCH ? ORDER BY rowid")
    with store.read() as conn:
        for match, k in (('"w1" OR "w2" OR "w7"', 3), ('"w3" OR "w9"', 1)):
            plain = all_rows(conn, sql.format(f="bm25", k=""), (match,))
            top = all_rows(conn, sql.format(f="bm25_top", k=f"{k}, "), (match,))
            assert top == plain and len(plain) > 3


def test_k_must_be_positive(store: Store):
    with store.read() as conn, pytest.raises(apsw.SQLError, match="positive integer"):
        all_rows(conn, f"SELECT bm25_top(exchanges_fts, 0, {WEIGHTS}) FROM exchanges_fts"
                 " WHERE exchanges_fts MATCH ?", ('"w1"',))


def test_a_phrase_counted_minus_two_selects_rows_and_adds_nothing(store: Store):
    """'"a" OR (("b") AND ("a"))' with the second "a" given a count of -2: the rows that
    hold "a", each with the value bm25() gives it for '"a" OR "b"' (the row count given
    as -1: FTS5 counts the other phrases' rows itself, as bm25() does)."""
    every = ("SELECT rowid, {f} FROM exchanges_fts WHERE exchanges_fts MATCH ?1"
             " ORDER BY rowid")
    blob = array("q", [-1, 0, -1, -1, -2]).tobytes()
    with store.read() as conn:
        for a, b in (("w9", "w0"), ("w14", "w1"), ("w2", "w3")):
            whole = dict(all_rows(conn, every.format(f=f"bm25(exchanges_fts, {WEIGHTS})"),
                                  (f'"{a}" OR "{b}"',)))
            holding = [r[0] for r in all_rows(conn, every.format(f="0"), (f'"{a}"',))]
            got = all_rows(conn, every.format(f=f"bm25_top(exchanges_fts, 1000, {WEIGHTS}, ?2)"),
                           (f'"{a}" OR (("{b}") AND ("{a}"))', blob))
            assert got == [(r, whole[r]) for r in holding] and holding


def test_the_commonest_phrases_are_matched_only_beside_a_rarer_one():
    match, given, reach = common_left(["deploy", "redis", "the"], [500, 8_000, 9_000],
                                      20_000, 200)
    assert match == '"deploy" OR (("redis" OR "the") AND ("deploy"))'
    assert given == [500, 8_000, 9_000, -2]  # each scored where it stands; the copy not
    idf = [math.log((20_000 - n + 0.5) / (n + 0.5)) for n in (8_000, 9_000)]
    assert reach == pytest.approx(2.2 * sum(idf))
    # two groups around a rare phrase, in the phrases' order
    assert common_left(["the", "deploy", "redis"], [9_000, 500, 8_000], 20_000, 200)[0] == (
        '(("the") AND ("deploy")) OR "deploy" OR (("redis") AND ("deploy"))')
    # not when the rarer phrases hold fewer than 2 k rows between them
    assert common_left(["deploy", "redis"], [300, 8_000], 20_000, 200) is None
    assert common_left(["deploy", "redis", "the"], [300, 8_000, 9_000], 20_000, 200)[0] == (
        '"deploy" OR "redis" OR (("the") AND ("deploy" OR "redis"))')
    # nor when they hold more than half of the postings
    assert common_left(["a", "b", "the"], [5_000, 5_000, 9_000], 20_000, 200) is None
    # nor when the common ones together could reach the rarer ones' k-th best
    assert common_left(["cache", "redis"], [6_000, 8_000], 20_000, 200) is None


def _store_wide(store: Store, monkeypatch: pytest.MonkeyPatch, floor: bool
                ) -> tuple[list[list[tuple[int, float]]], list[list[tuple[int, float]]], int, int]:
    """Store-wide searches of mixed common and rare words, with the split statement and
    without; how many splits were tried and how many of them were rejected."""
    rng = random.Random(8)
    _with_lengths(store, rng)
    tried, rejected = [0], [0]
    real_split, real_first = search.common_left, search._rarer_first

    def split(*args: object) -> object:
        made = real_split(*args)  # type: ignore[arg-type]
        tried[0] += made is not None
        return made

    def rarer_first(*args: object) -> object:
        before = tried[0]
        rows = real_first(*args)  # type: ignore[arg-type]
        rejected[0] += rows is None and tried[0] > before
        return rows

    monkeypatch.setattr(search, "common_left", split)
    monkeypatch.setattr(search, "_rarer_first", rarer_first)
    if floor:  # try every split the other conditions allow: the check must reject some
        monkeypatch.setattr(search, "_kth_floor", lambda *_: math.inf)
    queries = [" OR ".join(f'"{w}"' for w in rng.sample(VOCAB[:4], rng.randint(1, 3))
                           + rng.sample(VOCAB[6:], rng.randint(1, 2))) for _ in range(150)]
    with_split, whole = [], []
    with store.read() as conn:
        for match in queries:
            for limit in (3, 10):
                with_split.append(search.keyword_hits(conn, match, HitFilter(), limit))
        monkeypatch.setattr(search, "_rarer_first", lambda *_: None)
        for match in queries:
            for limit in (3, 10):
                whole.append(search.keyword_hits(conn, match, HitFilter(), limit))
    return with_split, whole, tried[0], rejected[0]


@pytest.mark.parametrize("floor", [False, True])
def test_leaving_the_commonest_phrases_out_finds_the_same_best_rows(
        store: Store, monkeypatch: pytest.MonkeyPatch, floor: bool):
    """A store-wide search's statement that matches the commonest phrases only beside a
    rarer one gives the whole statement's hits, row for row and double for double: its
    k-th best must beat every score a row it left out can reach, else the whole
    statement runs. Forced to try every split, the check rejects some."""
    with_split, whole, tried, rejected = _store_wide(store, monkeypatch, floor)
    assert with_split == whole
    assert tried > 20
    assert (rejected > 0) if floor else (rejected < tried)
