"""The derived keyword index of a PostgreSQL store (store.postgres.keywords): a
store-wide search ranks its candidates and the turns past its watermark as PostgreSQL
ranks every match, a turn is found when its ingest returns, a forgotten one never."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stenographer.app import App, open_app
from stenographer.settings import Settings
from store.search_filter import HitFilter
from tests.pg_server import PostgresServer

WORDS = ("redis cache timeout kafka consumer lag deploy gateway failed failing postgres "
         "index migration decided payment retry benchmark p95 latency node worker queue "
         "the a we it to for on with after before because rollout config flaky test").split()


def _turns(count: int) -> list[dict[str, str]]:
    """Turns of a small technical vocabulary (every word common), in sessions of 100."""
    rng = random.Random(3)
    return [{"session_id": f"s{i // 100}", "role": ("user", "assistant")[i % 2],
             "content": " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 40)))}
            for i in range(count)]


QUESTIONS = [
    '"redis" OR "cache" OR "timeout"', '"kafka" OR "consumer" OR "lag"',
    '"deploy" OR "gateway" OR "fail"', '"postgres" OR "index" OR "migration"',
    '"decided" OR "payment" OR "retry"', '"benchmark" OR "p95" OR "latency" OR "node"',
]


@pytest.fixture
def app(tmp_path: Path, postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch
        ) -> Iterator[App]:
    import store.postgres.keywords as keywords

    monkeypatch.setattr(keywords, "ANSWERS_FROM", 1_000)  # the batch builds no index
    app = open_app(Settings(data_dir=tmp_path, database_url=postgres_server.database()))
    out, _ = app.run("ingest_batch", {"turns": _turns(600)})
    assert out["reply"]["stored"] == 600
    monkeypatch.setattr(keywords, "ANSWERS_FROM", 100)  # a small store answers
    try:
        yield app
    finally:
        app.close()


def _hits(app: App, expression: str, limit: int, *, derived: bool, own_words: bool = False
          ) -> list[tuple[int, float]]:
    import store.postgres.search as pg_search

    with app.store.read() as conn:
        if not derived:
            conn.keywords = None  # type: ignore[attr-defined]
        return pg_search.keyword_hits(conn, expression, HitFilter(), limit,
                                      own_words=own_words)


def _ids(read: tuple[list[int], int, bool] | None) -> list[int]:
    assert read is not None
    return read[0]


def _search(app: App, query: str) -> list[dict[str, Any]]:
    out, _ = app.run("search", {"query": query, "cross_session": True, "limit": 5})
    hits: list[dict[str, Any]] = out["reply"]["hits"]
    return hits


def _yields(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the threads that hand the interpreter over (``time.sleep(0)``) from
    here on."""
    import threading
    import time

    names: list[str] = []
    real = time.sleep

    def sleep(seconds: float) -> None:
        if seconds == 0:
            names.append(threading.current_thread().name)
        real(seconds)

    monkeypatch.setattr(time, "sleep", sleep)
    return names


def test_the_candidates_rank_as_every_match_does(app: App, monkeypatch: pytest.MonkeyPatch):
    store: Any = app.store
    yields = _yields(monkeypatch)
    assert store.keywords.catch_up() == 600
    assert yields == []  # in the caller's thread (a bulk write's): it never sleeps
    with app.store.read() as conn:
        assert store.keywords.answering(conn) is not None
    for expression in QUESTIONS:
        for limit in (5, 20):
            every = _hits(app, expression, limit, derived=False)
            assert every, expression
            assert _hits(app, expression, limit, derived=True) == every


# A caller's expressions: phrases (in and out of the turns' usual order), prefixes, NEAR
# groups, AND, OR and NOT; the index holds no positions, so most of its candidates of a
# phrase or NEAR group do not match.
SYNTAX = ['"cache timeout"', '"timeout cache"', "migrat* deploy", "NEAR(redis cache, 3)",
          "NEAR(redis cache, 0)", "kafka NOT lag", '"retry benchmark" OR postgres',
          'fail* AND (worker OR queue)', '"the redis" + cache', "p9* latency",
          "timeout OR migration OR lag"]


def _rounds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many candidates each call of the index was asked for, from here on."""
    from store.postgres.keywords import LexemeIndex

    asked: list[int] = []
    real = LexemeIndex.candidates

    def candidates(self: LexemeIndex, *args: Any) -> Any:
        asked.append(args[2])
        return real(self, *args)

    monkeypatch.setattr(LexemeIndex, "candidates", candidates)
    return asked


def test_an_expression_in_fts_syntax_ranks_as_every_match_does(
        app: App, monkeypatch: pytest.MonkeyPatch):
    store: Any = app.store
    store.keywords.catch_up()
    asked = _rounds(monkeypatch)
    for expression in SYNTAX:
        for own_words in (False, True):
            for limit in (5, 20):
                every = _hits(app, expression, limit, derived=False, own_words=own_words)
                assert every, expression
                # PostgreSQL's own best, as it ranks every match: a longer list begins so
                assert every == _hits(app, expression, 50, derived=False,
                                      own_words=own_words)[:limit]
                asked.clear()
                assert _hits(app, expression, limit, derived=True,
                             own_words=own_words) == every, (expression, own_words, limit)
                assert asked, expression  # the index chose the candidates
    # words 0 apart are next to each other: few of the turns holding both match, so the
    # candidates are read deeper until enough do
    asked.clear()
    near = _hits(app, "NEAR(redis cache, 0)", 5, derived=True)
    assert asked == [40, 160, 640]
    # unless the share that matched says too many would be: PostgreSQL ranks every match
    monkeypatch.setattr("store.postgres.search.MAX_CANDIDATES", 300)
    asked.clear()
    assert _hits(app, "NEAR(redis cache, 0)", 5, derived=True) == near
    assert asked == [40]


def test_what_the_index_cannot_read_is_left_to_postgresql(
        app: App, monkeypatch: pytest.MonkeyPatch):
    import store.postgres.keywords as keywords

    store: Any = app.store
    store.keywords.catch_up()
    asked = _rounds(monkeypatch)
    monkeypatch.setattr(keywords, "MAX_EXPANSIONS", 1)  # "de*": decid, deploy
    for expression in ("context: redis", "{body dated}: cache", "de* cache"):
        every = _hits(app, expression, 10, derived=False)
        assert every, expression
        assert _hits(app, expression, 10, derived=True) == every
    assert asked == [80]  # only the prefix was read there, and found too wide


def test_postgresql_ranks_a_rarer_word_of_the_turns_own_words_over_every_match(
        tmp_path: Path, postgres_server: PostgresServer):
    """Without the derived index, an OR whose other words are held by most turns ranks
    the turns holding a rarer one first; a word of the turn's own words is ranked by
    ``ts_rank`` in a turn that holds it only in its context too, so there every match is
    ranked: the best two are the best two of twenty."""
    app = open_app(Settings(data_dir=tmp_path, database_url=postgres_server.database()))
    filler = " ".join(f"filler{i}" for i in range(200))
    contents = (["rare " * 16 + "common"]  # the next two hold it in their context
                + [f"common plain{i}" for i in range(4)]
                + [f"rare common {filler}" for _ in range(4)]  # once, in a long turn
                + [f"common other{i}" for i in range(11)])
    try:
        app.run("ingest_batch", {"turns": [{"role": "user", "session_id": "t", "content": c}
                                           for c in contents]})
        best = _hits(app, "rare OR common", 20, derived=True, own_words=True)
        assert _hits(app, "rare OR common", 2, derived=True, own_words=True) == best[:2]
    finally:
        app.close()


def test_a_turn_is_found_when_its_ingest_returns_and_a_forgotten_one_never(app: App):
    store: Any = app.store
    store.keywords.catch_up()
    index = store.keywords._index
    watermark = index.watermark
    app.run("ingest", {"role": "user", "content": "the zyzzyva quasar relay decided it",
                       "session_id": "late"})
    with app.store.read() as conn:
        assert store.keywords.answering(conn) is index  # one turn past the watermark
    hits = _search(app, "zyzzyva quasar")
    assert hits and "zyzzyva" in hits[0]["snippet"]
    assert index.watermark == watermark  # found beside the index, not in it
    assert store.keywords.catch_up() == 1
    ((exchange_id, _),) = _hits(app, '"zyzzyva"', 5, derived=True)
    zyzzyva = [("all", (("zyzzyva", False),))]
    assert index.candidates(zyzzyva, [1.0], 10) == ([exchange_id], index.watermark, False)
    app.run("forget", {"confirm": True, "exchange_ids": [exchange_id]})
    assert _hits(app, '"zyzzyva"', 5, derived=True) == []  # its row is gone at once
    store.keywords.catch_up()  # and its entry when the index next catches up
    assert index.candidates(zyzzyva, [1.0], 10) == ([], index.watermark, False)


def test_far_behind_postgresql_answers_while_a_thread_catches_up(
        app: App, monkeypatch: pytest.MonkeyPatch):
    import store.postgres.keywords as keywords

    store: Any = app.store
    monkeypatch.setattr(keywords, "HOT_LIMIT", 50)
    every = _hits(app, QUESTIONS[0], 10, derived=False)
    yields = _yields(monkeypatch)
    with app.store.read() as conn:  # nothing in the index yet: 600 turns past it
        assert store.keywords.answering(conn) is None
    assert _hits(app, QUESTIONS[0], 10, derived=True) == every
    store.keywords.wait()
    # beside the searches, it let them run between its turns
    assert yields.count("keyword-catch-up") == store.keywords._index.watermark
    assert store.keywords._index.watermark > 0
    with app.store.read() as conn:
        assert store.keywords.answering(conn) is not None
    assert _hits(app, QUESTIONS[0], 10, derived=True) == every


@contextlib.contextmanager
def _other_host(app: App, tmp_path: Path) -> Iterator[App]:
    """A second app on the same database with a data directory of its own (another
    host's copy of the derived index), its copy caught up with the 600 turns."""
    other = open_app(Settings(data_dir=tmp_path / "other-host",
                              database_url=app.settings.database_url))
    try:
        other_store: Any = other.store
        assert other_store.keywords.catch_up() == 600
        yield other
    finally:
        other.close()


def test_warm_takes_an_index_a_bulk_write_left_behind_up_to_date(
        app: App, monkeypatch: pytest.MonkeyPatch):
    """A new server's warm-up does what its first search would: the index, 600 turns
    behind (more than a search steps around), is taken in on a thread."""
    import store.postgres.keywords as keywords

    store: Any = app.store
    monkeypatch.setattr(keywords, "HOT_LIMIT", 50)
    assert store.keywords._index is None  # nothing opened yet
    store.warm()
    store.keywords.wait()
    assert store.keywords._index.watermark == 600
    with app.store.read() as conn:
        assert store.keywords.answering(conn) is store.keywords._index


def test_another_process_stops_answering_from_a_forgotten_turn_and_writes_its_index_again(
        app: App, tmp_path: Path, postgres_server: PostgresServer):
    """Another host's copy of the index (its own data directory) holds a turn forgotten
    through this one: its next search leaves the answer to PostgreSQL and writes its
    copy again on a thread, after which the copy no longer holds the turn."""
    first_store: Any = app.store
    first_store.keywords.catch_up()
    ((exchange_id, _),) = _hits(app, '"redis"', 1, derived=True)
    with app.store.read() as conn:  # the word as the index holds it (PostgreSQL's stem)
        ((lexeme,),) = conn.execute("SELECT (ts_lexize('english_stem', 'redis'))[1]").fetchall()
    redis = [("all", ((str(lexeme), False),))]
    with _other_host(app, tmp_path) as other:
        other_store: Any = other.store
        copy = other_store.keywords._index
        assert exchange_id in _ids(copy.candidates(redis, [1.0], 600))
        app.run("forget", {"confirm": True, "exchange_ids": [exchange_id]})
        with other.store.read() as conn:
            assert other_store.keywords.answering(conn) is None  # a tombstone it has not seen
        other_store.keywords.wait()
        assert exchange_id not in _ids(copy.candidates(redis, [1.0], 600))
        with other.store.read() as conn:
            assert other_store.keywords.answering(conn) is copy


def _audit(app: App) -> dict[str, list[int]]:
    out, _ = app.run("contract_audit", {"session_id": None})
    return {c["name"]: sorted(c["ids"]) for c in out["report"]["contracts"] if not c["passed"]}


def test_the_audit_names_missing_and_stale_entries_and_the_rebuild_repairs_them(
        app: App, tmp_path: Path):
    """Another host's copy (its own data directory) missing a turn's entry and still
    holding a turn forgotten through this one: the audit names both; `index rebuild`
    writes the copy again and the audit is clean."""
    first_store: Any = app.store
    assert first_store.keywords.catch_up() == 600
    assert _audit(app) == {}
    ((forgotten, _),) = _hits(app, '"redis"', 1, derived=True)
    ((dropped, _),) = _hits(app, '"kafka"', 1, derived=True)
    with _other_host(app, tmp_path) as other:
        other_store: Any = other.store
        copy = other_store.keywords._index
        writer = copy.index.writer(heap_size=15_000_000, num_threads=1)
        writer.delete_documents_by_query(copy._tv.Query.term_query(copy.schema, "id", dropped))
        writer.commit()
        writer.wait_merging_threads()
        app.run("forget", {"confirm": True, "exchange_ids": [forgotten]})
        found = _audit(other)
        assert found == {"derived_keyword_index": sorted([forgotten, dropped])}, found
        out, _ = other.run("contract_audit", {"session_id": None})
        assert "stenographer index rebuild" in out["report"]["text"]
        out, _ = other.run("keyword_index_rebuild", {})
        assert out["reply"]["turns"] == 599
        assert _audit(other) == {}
        assert _audit(app) == {}
