"""The derived keyword index beside a SQLite store (store.keyword_index), on real stores
and real processes: a turn is found as soon as its ingest returns (the queue beside the
index), the queue moves into the index without changing what is found, a forgotten turn
is never found, the contract audit names a missing and a stale entry and `stenographer
index rebuild` repairs both, a store without its index searches with FTS5 until rebuilt,
and a process killed while ingesting and flushing loses and duplicates nothing."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

import store.keyword_index as keyword_index_module
from stenographer.app import App, open_app
from stenographer.settings import Settings
from store.db import Store
from store.keyword_index import (
    HOT_LIMIT,
    Indexed,
    KeywordIndex,
    index_directory,
    needs_rebuild,
)
from store.keyword_syntax import fts_phrase, plain_phrases
from store.search import HitFilter, keyword_hits
from store.sql import Conn
from store.sqlite import search as fts5_search
from tests.conftest import REPO_ROOT

WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel")


def _settings(data: Path) -> Settings:
    return Settings(data_dir=data, turn_limit=1_000)


@pytest.fixture(autouse=True)
def index_answers_every_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """The index answers from 100,000 turns up; these stores are small."""
    monkeypatch.setattr(keyword_index_module.KeywordIndex, "answers_from", 0)


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    opened = open_app(_settings(tmp_path / "data"))
    try:
        yield opened
    finally:
        opened.close()


def ingest(app: App, session: str, content: str) -> int:
    out, _ = app.run("ingest", {"role": "user", "content": content, "session_id": session})
    return int(out["reply"]["exchange_id"])


def found(app: App, words: str, session: str | None) -> list[int]:
    """The derived index's keyword hits (FTS5 not asked)."""
    store = app.store
    derived = store.keyword_index()
    assert derived is not None
    with store.read() as conn:
        row = None if session is None else conn.execute(
            "SELECT id FROM sessions WHERE name = ?", (session,)).fetchone()
        flt = HitFilter(session_id=None if row is None else int(row[0]))
        expression = " OR ".join(f'"{w}"' for w in words.split())
        assert derived.trusted(conn)
        return [i for i, _ in derived.search(conn, plain_phrases(expression) or [],
                                             flt.session_id, 10)]


def fts5(app: App, words: str) -> list[int]:
    with app.store.read() as conn:
        expression = " OR ".join(f'"{w}"' for w in words.split())
        return [i for i, _ in keyword_hits(conn, expression, HitFilter(), 10)]


def audit(app: App) -> dict[str, list[int]]:
    out, _ = app.run("contract_audit", {"session_id": None})
    return {c["name"]: sorted(c["ids"]) for c in out["report"]["contracts"] if not c["passed"]}


def held(app: App) -> int:
    store = app.store
    assert isinstance(store, Store)
    store.keywords.index.reload()
    return int(store.keywords.index.searcher().num_docs)


def queued(app: App) -> int:
    with app.store.read() as conn:
        return int(conn.execute("SELECT count(*) FROM keyword_pending").fetchone()[0])


def test_plain_phrases_reads_the_graphs_word_queries_only():
    assert plain_phrases('"redis" OR "cache"') == ["redis", "cache"]
    assert plain_phrases('"say ""hi"""') == ['say "hi"']
    assert plain_phrases('"sqlite vec" OR "x"') == ["sqlite vec", "x"]
    for other in ('redis', '"a" AND "b"', '"a" OR', '"a" OR b', '"open', 'NEAR(a b)', ''):
        assert plain_phrases(other) is None, other


def test_a_turn_is_found_when_its_ingest_returns(app: App):
    first = ingest(app, "s1", "We chose Redis for the session cache.")
    assert found(app, "redis", "s1") == [first]  # from the queue: the index holds nothing
    assert held(app) == 0 and queued(app) == 1
    other = ingest(app, "s2", "Redis is also the job queue of the billing API.")
    assert found(app, "redis", "s1") == [first]  # a session search sees its own turns
    assert sorted(found(app, "redis", None)) == sorted([first, other])
    assert sorted(fts5(app, "redis")) == sorted([first, other])  # FTS5 holds them as well


def test_the_queue_moves_into_the_index_and_hits_stay_the_same(app: App):
    ids = [ingest(app, f"s{n % 3}", f"turn {n} mentions {WORDS[n % len(WORDS)]} and "
                                    f"{WORDS[(n * 3) % len(WORDS)]}") for n in range(40)]
    before = {w: found(app, w, None) for w in WORDS}
    store = app.store
    assert isinstance(store, Store)
    assert store.keywords.flush(store) == len(ids)
    assert queued(app) == 0 and held(app) == len(ids)
    after = {w: found(app, w, None) for w in WORDS}
    assert {w: sorted(v) for w, v in after.items()} == {w: sorted(v) for w, v in
                                                        before.items()}
    assert audit(app) == {}


def test_a_long_queue_is_moved_in_after_the_next_search(app: App):
    for n in range(HOT_LIMIT + 5):
        ingest(app, "s", f"note {n} about {WORDS[n % len(WORDS)]}")
    assert queued(app) == HOT_LIMIT + 5
    out, _ = app.run("search", {"query": "alpha", "session_id": "s", "limit": 10})
    assert out["hits"]
    store = app.store
    assert isinstance(store, Store)
    store.keywords.wait()  # the flush runs beside the search
    assert queued(app) == 0 and held(app) == HOT_LIMIT + 5


def test_a_bulk_sized_queue_is_searched_by_fts5_while_it_moves_in(
        app: App, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(keyword_index_module, "HOT_LIMIT", 5)
    monkeypatch.setattr(keyword_index_module, "BULK_QUEUE", 10)
    ids = [ingest(app, "s", f"note {n} about {WORDS[n % len(WORDS)]}") for n in range(12)]
    store = app.store
    assert isinstance(store, Store)
    with store.read() as conn:
        assert store.searched_keywords(conn) is None  # FTS5 answers: the search never waits
    store.keywords.wait()
    assert queued(app) == 0 and held(app) == 12
    out, _ = app.run("search", {"query": "alpha", "session_id": "s", "limit": 10})
    assert {ids[0], ids[len(WORDS)]} <= {h["exchange_id"] for h in out["hits"]}
    with store.read() as conn:
        assert store.searched_keywords(conn) is store.keywords  # caught up: it answers


def test_a_bulk_write_leaves_no_queue_a_search_would_step_around(
        app: App, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(keyword_index_module, "BULK_QUEUE", 10)
    turns = [{"role": "user", "content": f"note {n} about {WORDS[n % len(WORDS)]}",
              "session_id": "s"} for n in range(12)]
    out, trace = app.run("ingest_batch", {"turns": turns})
    assert out["reply"]["stored"] == 12
    assert "upkeep" in [s["node"] for s in trace["stages"]]
    assert queued(app) == 0 and held(app) == 12  # moved in by the batch, not a search
    with app.store.read() as conn:
        assert app.store.searched_keywords(conn) is app.store.keyword_index()
    # A batch that leaves a short queue leaves it to the searches.
    small = open_app(_settings(Path(app.store.location).parent / "small"))
    try:
        small.run("ingest_batch", {"turns": turns[:3]})
        assert queued(small) == 3 and held(small) == 0
    finally:
        small.close()
    assert audit(app) == {}


def first_hit_while_untrusted(data: Path, word: str) -> tuple[int | None, str | None]:
    """The store in ``data`` alone (no graph runs the rebuild): it needs one, its derived
    index is not trusted, and FTS5 answers a search for ``word``: its first hit, and
    what ``meta`` says of the index."""
    bare = Store(data / "steno.db")
    try:
        assert needs_rebuild(bare)
        derived = bare.keyword_index()
        assert derived is not None
        with bare.read() as conn:
            assert not derived.trusted(conn)
            hits = keyword_hits(conn, f'"{word}"', HitFilter(), 10, derived=derived)
            row = conn.execute("SELECT value FROM meta WHERE key = 'keyword_index'"
                               ).fetchone()
        return (hits[0][0] if hits else None), (None if row is None else row[0])
    finally:
        bare.close()


def _opened_at_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int) -> App:
    monkeypatch.setattr(keyword_index_module.KeywordIndex, "answers_from", size)
    return open_app(_settings(tmp_path / "sized"))


def kept(app: App) -> str | None:
    with app.store.read() as conn:
        row = conn.execute("SELECT value FROM meta WHERE key = 'keyword_index'").fetchone()
    return None if row is None else str(row[0])


def test_below_its_size_nothing_is_queued_and_the_batch_that_reaches_it_builds_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Below ``answers_from`` the store keeps no index and queues nothing (FTS5 answers;
    the audit expects nothing of the index); the batch that brings the store to that
    size builds it from the turns, and it then answers with FTS5's hits."""
    monkeypatch.setattr(keyword_index_module, "BULK_QUEUE", 10)
    monkeypatch.setattr(keyword_index_module, "HOT_LIMIT", 5)
    monkeypatch.setattr(fts5_search, "MERGE_FROM", 10)
    app = _opened_at_size(tmp_path, monkeypatch, 40)
    try:
        turns = [{"role": "user", "content": f"note {n} about {WORDS[n % len(WORDS)]}",
                  "session_id": f"s{n % 2}"} for n in range(45)]
        out, _ = app.run("ingest_batch", {"turns": turns[:30]})
        stored = out["reply"]["exchange_ids"]
        store = app.store
        assert isinstance(store, Store)
        assert queued(app) == 0 and kept(app) is None and store._keywords is None
        out, _ = app.run("search", {"query": "alpha", "session_id": None,
                                    "cross_session": True, "limit": 10})
        assert {h["exchange_id"] for h in out["hits"]} >= {stored[0], stored[8], stored[16],
                                                           stored[24]}
        store.upkeep.wait()  # the search started FTS5's upkeep (its merge was due)
        # without opening the derived index (nor making its directory)
        assert store._keywords is None and not index_directory(store.path).exists()
        with store.read() as conn:
            assert conn.execute("SELECT value FROM meta WHERE key = 'fts_merged_at'"
                                ).fetchone()[0] == "30"
        assert audit(app) == {} and queued(app) == 0 and held(app) == 0
        out, _ = app.run("ingest_batch", {"turns": turns[30:]})  # 45 turns: past 40
        assert queued(app) == 0 and held(app) == 45
        assert sorted(found(app, "alpha", None)) == sorted(fts5(app, "alpha"))
        with store.read() as conn:
            assert store.searched_keywords(conn) is store.keywords  # it answers now
        later = ingest(app, "s0", "a later note about kilo")
        assert queued(app) == 1 and found(app, "kilo", None) == [later]
        assert audit(app) == {}
    finally:
        app.close()


def test_an_import_that_reaches_its_size_builds_it(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch):
    """An import is a bulk write too: the one that brings the store to ``answers_from``
    builds the index, which then answers with FTS5's hits."""
    bundle = tmp_path / "bundle.zst"
    source = open_app(_settings(tmp_path / "source"))
    try:
        source.run("ingest_batch", {"turns": [
            {"role": "user", "content": f"note {n} about {WORDS[n % len(WORDS)]}",
             "session_id": f"s{n % 3}"} for n in range(30)]})
        source.run("sync_export", {"path": str(bundle)})
    finally:
        source.close()
    app = _opened_at_size(tmp_path, monkeypatch, 20)
    try:
        assert kept(app) is None
        out, _ = app.run("sync_import", {"path": str(bundle)})
        assert out["reply"]["applied"] == 30
        assert kept(app) is not None and queued(app) == 0 and held(app) == 30
        assert sorted(found(app, "bravo", None)) == sorted(fts5(app, "bravo"))
        assert audit(app) == {}
    finally:
        app.close()


def test_single_ingests_that_reach_its_size_build_it_beside_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    app = _opened_at_size(tmp_path, monkeypatch, 12)
    try:
        ids = [ingest(app, f"s{n % 2}", f"turn {n} about {WORDS[n % len(WORDS)]}")
               for n in range(11)]
        store = app.store
        assert isinstance(store, Store)
        assert queued(app) == 0 and store._keywords is None
        ids.append(ingest(app, "s0", f"turn 11 about {WORDS[3]}"))  # the 12th: built beside
        store.keywords.wait()
        assert held(app) == 12 and queued(app) == 0 and kept(app) != "started"
        for word in WORDS:
            assert sorted(found(app, word, None)) == sorted(fts5(app, word)), word
        assert audit(app) == {}
    finally:
        app.close()


def test_a_turn_stored_while_it_is_built_is_queued_and_found(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The build reads the turns in one snapshot, taken after the store began keeping the
    index: a turn stored after that snapshot is queued (and so found), not lost."""
    from nodes.publish.keyword_index import stored_entries

    app = _opened_at_size(tmp_path, monkeypatch, 8)
    try:
        for n in range(7):
            ingest(app, "s", f"turn {n} about {WORDS[n % len(WORDS)]}")
        store = app.store
        assert isinstance(store, Store)
        during: list[int] = []

        def entries(conn: Conn) -> Iterator[Indexed]:
            for n, entry in enumerate(stored_entries(conn)):
                if n == 3:  # mid-build: another thread (its own connection) stores a turn
                    writer = threading.Thread(target=lambda: during.append(
                        ingest(app, "t", "stored during the build about zulu")))
                    writer.start()
                    writer.join()
                yield entry

        with store.read() as conn:
            assert not keyword_index_module.build_due(conn)  # 7 turns: below 8
        # The first build, as the write that reaches the size runs it; the turn stored
        # during it is the eighth, whose ingest finds the build started and leaves it.
        assert store.keywords.rebuild(store, entries, first_build=True) == 7
        assert queued(app) == 1 and held(app) == 7 and kept(app) != "started"
        assert found(app, "zulu", None) == during
        assert audit(app) == {}
        store.keywords.flush(store)
        assert found(app, "zulu", None) == during and held(app) == 8 and queued(app) == 0
        assert store.keywords.rebuild(store, entries, first_build=True) == 0  # kept: none
    finally:
        app.close()


BUILDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    sys.path.insert(0, {root!r})
    import store.keyword_index as k
    from nodes.publish.keyword_index import stored_entries
    from store.db import Store
    k.KeywordIndex.answers_from = 5
    store = Store(Path({path!r}))

    def slow(conn):
        for n, entry in enumerate(stored_entries(conn)):
            if n == 3:
                print("building", flush=True)
                time.sleep(600)
            yield entry

    store.keyword_index().rebuild(store, slow, first_build=True)
""")


def test_a_process_killed_while_it_builds_leaves_an_index_rebuilt_at_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    app = _opened_at_size(tmp_path, monkeypatch, 1_000)  # below: nothing built yet
    ids = [ingest(app, "s", f"turn {n} about {WORDS[n]}") for n in range(6)]
    data = app.settings.data_dir
    app.close()
    proc = subprocess.Popen(
        [sys.executable, "-c", BUILDER.format(root=str(REPO_ROOT), path=str(data / "steno.db"))],
        stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "building"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    monkeypatch.setattr(keyword_index_module.KeywordIndex, "answers_from", 5)
    assert first_hit_while_untrusted(data, "charlie") == (ids[2], "started")
    later = open_app(_settings(data))  # a server or a command: rebuilt before it serves
    try:
        assert isinstance(later.store, Store) and not needs_rebuild(later.store)
        assert audit(later) == {} and held(later) == 6
        assert found(later, "charlie", "s")[0] == ids[2]
    finally:
        later.close()


def test_a_forgotten_turn_is_never_found(app: App):
    keep = ingest(app, "s", "the parser drops tabs")
    gone = ingest(app, "s", "the parser drops newlines")
    store = app.store
    assert isinstance(store, Store)
    store.keywords.flush(store)
    out, _ = app.run("forget", {"confirm": True, "exchange_ids": [gone], "session_id": None,
                                "since": None, "until": None, "text": None,
                                "reason": "test", "vacuum": False})
    assert out["reply"]["count"] == 1
    assert found(app, "parser", "s") == [keep]  # queued removal: the entry is left out
    store.keywords.flush(store)
    assert found(app, "parser", "s") == [keep] and held(app) == 1
    assert audit(app) == {}


def test_a_searching_process_holds_the_turns_it_ingests_as_the_queue_would_give_them(
        app: App, monkeypatch: pytest.MonkeyPatch):
    """A process that has the derived index open (it searches) takes each turn it ingests
    into its copy of the queue from the text it wrote: the next search reads and
    tokenizes none of them, and holds what reading the queue would have given. A turn
    forgotten since is left out, as before."""
    store = app.store
    assert isinstance(store, Store)
    first_id = ingest(app, "s0", "the parser drops tabs")
    assert found(app, "parser", None) == [first_id]  # the index opened, the copy read
    ids = [ingest(app, f"s{n % 3}", f"turn {n}: {WORDS[n % len(WORDS)]}_{WORDS[n % 5]} "
                                    f"{'naïve café — ' if n % 4 == 0 else ''}parser {n}?")
           for n in range(30)]
    tokenized: list[str] = []
    real = keyword_index_module.document_fields

    def counted(content: str, context: str, dated: str) -> Any:
        tokenized.append(content)
        return real(content, context, dated)

    monkeypatch.setattr(keyword_index_module, "document_fields", counted)
    hits = found(app, "parser", None)
    assert tokenized == [] and set(hits) <= {first_id, *ids} and len(hits) == 10
    held_copy = dict(store.keywords._hot)
    assert len(held_copy) == len(ids) + 1
    store.keywords._hot.clear()  # read again from the queue's rows
    assert found(app, "parser", None) == hits
    assert len(tokenized) == len(ids) + 1 and store.keywords._hot == held_copy
    out, _ = app.run("forget", {"confirm": True, "exchange_ids": [ids[3]], "session_id": None,
                                "since": None, "until": None, "text": None,
                                "reason": "test", "vacuum": False})
    assert out["reply"]["count"] == 1
    assert ids[3] not in found(app, "turn 3", None) and ids[4] in found(app, "4", None)
    assert audit(app) == {}


def test_the_audit_names_missing_and_stale_entries_and_the_rebuild_repairs_them(
        app: App):
    ids = [ingest(app, "s", f"turn {n} about {WORDS[n]}") for n in range(6)]
    store = app.store
    assert isinstance(store, Store)
    store.keywords.flush(store)
    assert audit(app) == {}
    store.keywords.delete_entry(ids[2])
    store.keywords.add_entry((ids[-1] + 50, 1, "a turn that was never stored", "", ""))
    assert audit(app) == {"derived_keyword_index": [ids[2], ids[-1] + 50]}
    out, _ = app.run("contract_audit", {"session_id": None})
    assert "stenographer index rebuild" in out["report"]["text"]
    app.close()
    rebuilt = subprocess.run(
        [str(Path(sys.executable).parent / "stenographer"), "index", "rebuild", "--json"],
        env={**os.environ, "OMEGA_STENOGRAPHER_DIR": str(app.settings.data_dir)},
        capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert '"turns": 6' in rebuilt.stdout
    again = open_app(_settings(app.settings.data_dir))
    try:
        assert audit(again) == {}
        assert found(again, WORDS[2], "s")[0] == ids[2]  # the next turns hold it as context
        assert found(again, "never", None) == []
    finally:
        again.close()


def test_a_store_without_its_index_searches_with_fts5_and_is_rebuilt_at_start(app: App):
    ids = [ingest(app, "s", f"turn {n} about {WORDS[n]}") for n in range(4)]
    store = app.store
    assert isinstance(store, Store)
    store.keywords.flush(store)
    data = app.settings.data_dir
    app.close()
    shutil.rmtree(data / "steno.db.keywords")  # a copy of the file alone, say
    assert first_hit_while_untrusted(data, "charlie")[0] == ids[2]
    later = open_app(_settings(data))  # a server or a command: rebuilt before it serves
    try:
        assert isinstance(later.store, Store) and not needs_rebuild(later.store)
        assert audit(later) == {}
        assert found(later, "charlie", "s")[0] == ids[2]
        assert held(later) == 4 and queued(later) == 0
    finally:
        later.close()


WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    sys.path.insert(0, {root!r})
    import store.keyword_index as k
    from stenographer.app import open_app
    from stenographer.settings import Settings
    k.KeywordIndex.answers_from = 0  # the index kept from the first turn
    app = open_app(Settings(data_dir=Path({data!r}), turn_limit=1_000))
    for n in range(10_000):
        out, _ = app.run("ingest", {{"role": "user", "session_id": "s{{}}".format(n % 4),
                                    "content": "turn number w{{}}x of the run".format(n)}})
        print(out["reply"]["exchange_id"], flush=True)
        if n % 7 == 6:
            app.store.keywords.flush(app.store)
""")


def test_a_process_killed_while_ingesting_and_flushing_loses_and_duplicates_nothing(
        tmp_path: Path):
    data = tmp_path / "data"
    proc = subprocess.Popen([sys.executable, "-c", WRITER.format(root=str(REPO_ROOT),
                                                                 data=str(data))],
                            stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT)
    assert proc.stdout is not None
    acknowledged: list[int] = []
    for line in proc.stdout:
        acknowledged.append(int(line))
        if len(acknowledged) == 60:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    app = open_app(_settings(data))
    try:
        assert audit(app) == {}
        with app.store.read() as conn:
            stored = [int(r[0]) for r in conn.execute("SELECT id FROM exchanges ORDER BY id")]
        assert set(acknowledged) <= set(stored)
        for n, exchange_id in enumerate(stored):  # later turns of its session: as context
            hits = found(app, f"w{n}x", None)
            assert hits[0] == exchange_id and len(hits) == len(set(hits))
        store = app.store
        assert isinstance(store, Store)
        store.keywords.flush(store)
        assert queued(app) == 0 and held(app) == len(stored)  # no entry twice
        assert audit(app) == {}
    finally:
        app.close()


OTHER_WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    sys.path.insert(0, {root!r})
    import store.keyword_index as k
    from stenographer.app import open_app
    from stenographer.settings import Settings
    k.KeywordIndex.answers_from = 0
    app = open_app(Settings(data_dir=Path({data!r}), turn_limit=1_000))
    for n in range(5):
        out, _ = app.run("ingest", {{"role": "user", "session_id": "other",
                                    "content": "zebracorn report {{}}".format(n)}})
        print(out["reply"]["exchange_id"], flush=True)
    app.store.keywords.flush(app.store)
    app.close()
""")


def test_turns_another_process_took_into_the_index_are_found(app: App):
    """An import in another process queues its turns and takes them into the index
    before this process searches again: this process never saw them queued, and finds
    them in the index."""
    first = ingest(app, "s", "the parser drops tabs")
    store = app.store
    assert isinstance(store, Store)
    store.keywords.flush(store)
    assert found(app, "parser", None) == [first]  # the queue read, empty
    done = subprocess.run(
        [sys.executable, "-c", OTHER_WRITER.format(root=str(REPO_ROOT),
                                                   data=str(app.settings.data_dir))],
        capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr
    written = [int(line) for line in done.stdout.split()]
    assert len(written) == 5 and queued(app) == 0
    assert sorted(found(app, "zebracorn", None)) == written
    assert found(app, "parser", None) == [first]
    assert audit(app) == {}


def test_forgetting_rewrites_the_index_so_no_segment_keeps_the_words(app: App):
    marker = "Zephyrquillbrant"
    keep = ingest(app, "s", "the parser drops tabs")
    gone = ingest(app, "s", f"the secret is {marker}")
    store = app.store
    assert isinstance(store, Store)
    derived = store.keywords
    derived.flush(store)  # the word is in a segment of the index now
    term = keyword_index_module.fts_words(marker)[0]

    def segments_holding() -> int:  # deleted entries count until their segment goes
        derived.index.reload()
        return int(derived.index.searcher().doc_freq("all", term))

    assert segments_holding() == 1
    out, _ = app.run("forget", {"confirm": True, "exchange_ids": [gone], "session_id": None,
                                "since": None, "until": None, "text": None,
                                "reason": "test", "vacuum": True})
    assert out["reply"]["count"] == 1
    assert segments_holding() == 0
    assert found(app, "parser", "s") == [keep] and audit(app) == {}


def held_and_queued(app: App, text: Callable[[], str], held: int, queued: int,
                    sessions: int) -> tuple[Store, KeywordIndex, list[int]]:
    """``held`` turns of ``text()`` moved into the index, then ``queued`` more left in the
    queue (searched beside it), over ``sessions`` sessions: the store, its index, the
    turns' ids."""
    store = app.store
    assert isinstance(store, Store)
    ids = [ingest(app, f"conv{n % sessions}", text()) for n in range(held)]
    store.keywords.flush(store)
    ids += [ingest(app, f"conv{n % sessions}", text()) for n in range(queued)]
    derived = store.keyword_index()
    assert derived is not None
    return store, derived, ids


def test_the_derived_index_ranks_and_scores_as_fts5(tmp_path: Path):
    """On a store of a few thousand turns (most in the index, some queued), plain-word
    searches store-wide and in a session return FTS5's top 10, with its scores."""
    import random

    rng = random.Random(7)
    vocabulary = [f"{a}{b}" for a in ("kel", "mar", "tor", "vin", "sal", "dob")
                  for b in ("ax", "en", "is", "ot", "um", "yr", "ith", "ond")]
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]  # a few words common

    def text() -> str:
        words = rng.choices(vocabulary, weights, k=rng.randint(3, 60))
        return " ".join(words) + rng.choice(("", " May", " the report"))

    opened = open_app(Settings(data_dir=tmp_path / "data", turn_limit=1_000))
    try:
        store, derived, _ = held_and_queued(opened, text, 2_400, 60, 6)
        with store.read() as conn:
            sessions = [int(r[0]) for r in conn.execute("SELECT id FROM sessions")]
            queries = [rng.sample(vocabulary, rng.randint(1, 4)) for _ in range(25)]
            queries += [[vocabulary[0], "may"], [f"{vocabulary[3]} {vocabulary[5]}"],
                        [vocabulary[9], f"s{sessions[2]}"]]  # a phrase; a scope token
            compared = 0
            for words in queries:
                expression = " OR ".join(f'"{w}"' for w in words)
                for session in (None, *sessions[:3]):
                    expected = keyword_hits(conn, expression, HitFilter(session_id=session),
                                            10)
                    got = derived.search(conn, plain_phrases(expression) or [], session, 10)
                    assert [i for i, _ in got] == [i for i, _ in expected], (words, session)
                    assert [s for _, s in got] == pytest.approx([s for _, s in expected],
                                                                rel=1e-9)
                    compared += bool(expected)
            assert compared > 100
    finally:
        opened.close()


def _rows_holding(conn: Conn, words: list[str]) -> list[int]:
    """FTS5's own count of the rows holding each word (what bm25() counts)."""
    return [int(conn.execute("SELECT count(*) FROM exchanges_fts WHERE exchanges_fts MATCH ?",
                             (fts_phrase(w),)).fetchone()[0]) for w in words]


def test_a_sessions_plain_search_is_fts5s_with_its_words_counted_by_the_index(
        tmp_path: Path):
    """A session's plain search is FTS5's (the same hits and scores, to the bit), its
    words' counts over the whole store read from the index and the queue; where those
    would not be exact (a removal queued, deleted entries in the index, an entry the
    queue does not explain) none is read from it (the index answers, as before)."""
    import random

    from nodes.publish.keyword_index import stored_entries
    from store.forget import reindex_turn
    from store.sqlite.doc_freq import snapshot

    rng = random.Random(11)
    vocabulary = [f"{a}{b}" for a in ("kel", "mar", "tor", "vin") for b in ("ax", "en", "is")]

    def text() -> str:  # a few name a session's scope token (Amazon S3 is "s3")
        return " ".join(rng.choices(vocabulary, k=rng.randint(3, 30))) + rng.choice(
            ("", "", "", " s1", " s2"))

    data = tmp_path / "data"
    opened = open_app(_settings(data))
    bare = Store(data / "steno.db")  # its own connections: FTS5 counts every word itself
    try:
        store, derived, ids = held_and_queued(opened, text, 600, 20, 4)

        def rows_read(words: list[str]) -> tuple[list[int] | None, list[int]]:
            with store.read() as conn:
                rows = int(conn.execute("SELECT count(*) FROM exchanges").fetchone()[0])
                return derived.phrase_rows(conn, words, rows), _rows_holding(conn, words)

        def same_as_fts5() -> int:
            with store.read() as conn:
                sessions = [int(r[0]) for r in conn.execute("SELECT id FROM sessions")]
            compared = 0
            for _ in range(12):
                words = rng.sample([*vocabulary, "s1", "s2"], rng.randint(1, 4))
                expression = " OR ".join(f'"{w}"' for w in words)
                for session in sessions:
                    flt = HitFilter(session_id=session)
                    with bare.read() as conn:
                        expected = keyword_hits(conn, expression, flt, 10)
                    with store.read() as conn:
                        got = keyword_hits(conn, expression, flt, 10, derived=derived)
                    assert got == expected, (words, session)
                    compared += bool(expected)
            return compared

        counted, expected = rows_read(vocabulary)
        assert counted == expected and min(expected) > 0
        assert same_as_fts5() > 40
        with store.read() as conn:  # the counts were kept from the index: FTS5 counted none
            kept = snapshot(conn)
            assert kept is not None and kept.counts
            assert {w: kept.counts[w][1] for w in vocabulary if w in kept.counts} == {
                w: n for w, n in zip(vocabulary, expected, strict=True) if w in kept.counts}
        with store.read() as conn:
            rows = int(conn.execute("SELECT count(*) FROM exchanges").fetchone()[0])
            session = int(conn.execute("SELECT min(id) FROM sessions").fetchone()[0])
            assert derived.phrase_rows(conn, [f"{vocabulary[0]} {vocabulary[1]}"], rows) is None
            scope = [f"s{session}", f"s{session + 1}"]  # FTS5 matches its column too
            assert derived.phrase_rows(conn, scope, rows) == _rows_holding(conn, scope)
            assert derived.phrase_rows(conn, vocabulary, rows + 1) is None

        def forget(exchange_id: int) -> None:
            out, _ = opened.run("forget", {
                "confirm": True, "exchange_ids": [exchange_id], "session_id": None,
                "since": None, "until": None, "text": None, "reason": "test",
                "vacuum": False})
            assert out["reply"]["count"] == 1

        forget(ingest(opened, "conv0", text()))  # queued, then its removal in its place
        with store.read() as conn:  # where the index and the queue would add up
            beside = int(derived.index.searcher().num_docs) + queued(opened)
            assert derived.phrase_rows(conn, vocabulary, beside) is None
        forget(ids[5])  # its removal queued, its neighbours re-indexed
        assert rows_read(vocabulary)[0] is None
        with store.read() as conn:  # even where the index and the queue would add up (an
            # index a flush behind, of another process): a removal is queued
            beside = int(derived.index.searcher().num_docs) + queued(opened)
            assert derived.phrase_rows(conn, vocabulary, beside) is None
        store.keywords.flush(store)  # deleted entries in the index's segments now
        assert queued(opened) == 0
        words = [*vocabulary, *scope]
        counted, expected = rows_read(words)  # the live entries counted
        assert counted == expected and same_as_fts5() > 40
        derived.rebuild(store, stored_entries)  # no deleted entry left
        counted, expected = rows_read(words)
        assert counted == expected and same_as_fts5() > 40
        with store.write() as conn:  # a turn queued again, its entry still in the index
            exchange_id, session, content = conn.execute(
                "SELECT id, session_id, content FROM exchanges WHERE id = ?", (ids[9],)
            ).fetchone()
            reindex_turn(conn, exchange_id, session, content, vocabulary[1], "")
        assert rows_read(vocabulary)[0] is None
        with store.read() as conn:  # also where the index and the queue would add up
            beside = int(derived.index.searcher().num_docs) + queued(opened)
            assert derived.phrase_rows(conn, vocabulary, beside) is None
        store.keywords.flush(store)  # its old entry deleted
        assert queued(opened) == 0
        counted, expected = rows_read(words)
        assert counted == expected
        store.keywords.add_entry((ids[-1] + 50, 1, f"{vocabulary[0]} never stored", "", ""))
        assert rows_read(vocabulary)[0] is None
    finally:
        bare.close()
        opened.close()


def _segments(store: Store) -> int:
    """How many segments the store's FTS5 index has."""
    with store.read() as conn:
        return int(conn.execute(
            "SELECT count(DISTINCT segid) FROM exchanges_fts_idx").fetchone()[0])


def _word_hits(store: Store) -> dict[str, list[tuple[int, float]]]:
    with store.read() as conn:
        return {w: keyword_hits(conn, f'"{w}" OR "turn"', HitFilter(), 10) for w in WORDS}


def test_fts5_segments_are_merged_as_the_store_grows_with_the_same_hits(
        app: App, monkeypatch: pytest.MonkeyPatch):

    monkeypatch.setattr(fts5_search, "MERGE_FROM", 10)
    monkeypatch.setattr(fts5_search, "MERGE_PAGES", 1)  # several steps
    for n in range(40):  # one transaction each: a segment each until FTS5 merges them
        ingest(app, f"s{n % 3}", f"turn {n} mentions {WORDS[n % len(WORDS)]} and "
                                 f"{WORDS[(n * 3) % len(WORDS)]}")
    store = app.store
    assert isinstance(store, Store)

    before, split = _word_hits(store), _segments(store)
    assert split > 1
    assert fts5_search.keep_merged(store) > 1
    assert _segments(store) == 1 and _word_hits(store) == before
    assert fts5_search.keep_merged(store) == 0  # not due until the store grows
    for n in range(10):
        ingest(app, "s0", f"later turn {n} on {WORDS[n % len(WORDS)]}")
    assert fts5_search.keep_merged(store) >= 1 and _segments(store) == 1
    assert audit(app) == {}


def test_the_merge_of_every_segment_ends_while_turns_are_ingested(
        app: App, monkeypatch: pytest.MonkeyPatch):
    """A server's turns keep coming while its upkeep thread merges: each ingest commits a
    segment between two of the merge's steps. The merge goes on with the segments it
    started with and ends (it used to start over at every step, with its own partial
    output among the inputs, and grew the index instead)."""
    monkeypatch.setattr(fts5_search, "MERGE_FROM", 10)
    monkeypatch.setattr(fts5_search, "MERGE_PAGES", 2)  # several steps
    for n in range(120):
        ingest(app, f"s{n % 3}", f"turn {n} mentions {WORDS[n % len(WORDS)]} and "
                                 f"{WORDS[(n * 7) % len(WORDS)]}")
    store = app.store
    assert isinstance(store, Store)
    store.upkeep.wait()
    with store.read() as conn:
        rows_before = conn.execute("SELECT count(*) FROM exchanges_fts_data").fetchone()[0]
    assert _segments(store) > 1
    largest, due, _ = fts5_search.merge_state(store)
    assert due <= largest
    meanwhile = iter(range(200))

    def one_more_turn() -> bool:  # called before each step: a turn ingested meanwhile
        n = next(meanwhile, None)
        if n is None:
            return True
        ingest(app, f"s{n % 3}", f"meanwhile {n} on {WORDS[n % len(WORDS)]}")
        return False

    steps = fts5_search.keep_merged(store, one_more_turn)
    assert 1 < steps < 100  # ended by itself, not by running out of turns
    assert fts5_search.merge_state(store)[1] > largest  # recorded as merged
    with store.read() as conn:
        rows_after = conn.execute("SELECT count(*) FROM exchanges_fts_data").fetchone()[0]
    assert rows_after < rows_before + steps * 4  # not each step's pages kept on top
    for n in meanwhile:  # the rest, then everything found as FTS5 finds it merged
        ingest(app, f"s{n % 3}", f"meanwhile {n} on {WORDS[n % len(WORDS)]}")
    before = _word_hits(store)
    assert fts5_search.keep_merged(store) >= 1 and _segments(store) == 1
    assert _word_hits(store) == before
    assert audit(app) == {}


SMALL_TURNS_IN_TEST = 10


def test_small_segments_are_merged_among_themselves_with_the_same_hits(
        app: App, monkeypatch: pytest.MonkeyPatch):
    """Between two merges of the whole index, the segments that turns written one at a
    time add are merged among themselves once a search finds SMALL_TURNS turns written
    since the last merge: fewer segments, the same hits."""
    monkeypatch.setattr(fts5_search, "MERGE_FROM", 10)
    monkeypatch.setattr(fts5_search, "SMALL_TURNS", SMALL_TURNS_IN_TEST)
    monkeypatch.setattr(keyword_index_module.KeywordIndex, "answers_from", 1_000)  # FTS5's
    store = app.store
    assert isinstance(store, Store)

    for n in range(160):
        ingest(app, f"s{n % 3}", f"turn {n} mentions {WORDS[n % len(WORDS)]}")
    assert fts5_search.keep_merged(store) >= 1 and _segments(store) == 1
    for n in range(39):  # not enough growth for the whole index to be due again
        ingest(app, f"s{n % 3}", f"later turn {n} on {WORDS[(n * 3) % len(WORDS)]}")
    before, split = _word_hits(store), _segments(store)
    assert split > 3
    assert fts5_search.keep_merged(store) == 0
    store.upkeep.wait()
    with store.read() as conn:  # a search finds the small merge due and starts it
        store.searched_keywords(conn)
    store.upkeep.wait()
    assert _segments(store) < split and _word_hits(store) == before
    assert fts5_search.merge_small(store) == 0  # not due before SMALL_TURNS more turns
    # Another process (a hook's) finds no merge due in the store and writes nothing.
    other = Store(store.path)
    probe = apsw.Connection(str(store.path))
    try:
        written = probe.execute("PRAGMA data_version").fetchone()
        with other.read() as conn:
            other.searched_keywords(conn)
        other.upkeep.wait()
        assert probe.execute("PRAGMA data_version").fetchone() == written
    finally:
        probe.close()
        other.close()
    for n in range(SMALL_TURNS_IN_TEST):
        ingest(app, f"s{n % 3}", f"last turn {n} on {WORDS[n % len(WORDS)]}")
    assert fts5_search.merge_small(store) >= 1  # due again
    assert audit(app) == {}


def test_fts5_segments_are_merged_beside_the_derived_index_when_its_queue_is_short(
        app: App, monkeypatch: pytest.MonkeyPatch):
    """From the derived index's size a session's plain searches are FTS5's, so its
    segments are merged there too; the merge gives the thread up to the index's flush
    when the queue grows past HOT_LIMIT, and goes on once it is taken in."""
    monkeypatch.setattr(fts5_search, "MERGE_FROM", 10)
    monkeypatch.setattr(fts5_search, "MERGE_PAGES", 1)  # several steps
    store = app.store
    assert isinstance(store, Store)
    for n in range(HOT_LIMIT + 20):
        ingest(app, f"s{n % 3}", f"turn {n} mentions {WORDS[n % len(WORDS)]}")
    before, split = _word_hits(store), _segments(store)
    assert split > 1 and queued(app) > HOT_LIMIT
    store._keep_fts5()  # the queue waits for the thread: one step, then it stops
    largest, due, _ = fts5_search.merge_state(store)
    assert _segments(store) > 1 and due <= largest  # still due
    store.keywords.flush(store)
    with store.read() as conn:  # a search finds the merge due and starts it
        assert store.searched_keywords(conn) is not None
    store.upkeep.wait()
    assert _segments(store) == 1 and _word_hits(store) == before
    assert audit(app) == {}


def test_queries_in_fts5_syntax_are_answered_as_fts5_answers_them(tmp_path: Path):
    """A caller's expression (prefixes, NEAR groups, phrases, AND, OR) is answered by the
    derived index with FTS5's hits and scores, store-wide and in a session, over turns in
    the index, turns still queued and turns forgotten (some moved in, some queued); what
    it does not read as FTS5 does is left to FTS5, and a bad expression is rejected with
    FTS5's own error."""
    import random

    from store.search_filter import FtsSyntaxError

    rng = random.Random(11)
    vocabulary = [f"{a}{b}" for a in ("kel", "mar", "tor", "vin", "sal", "dob")
                  for b in ("ax", "en", "is", "ot", "um", "yr", "ith", "ond")]
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]

    def text() -> str:
        words = rng.choices(vocabulary, weights, k=rng.randint(3, 50))
        return " ".join(words) + rng.choice(("", " May", " the report"))

    opened = open_app(Settings(data_dir=tmp_path / "data", turn_limit=1_000))
    try:
        ids = [ingest(opened, f"conv{n % 5}", text()) for n in range(1_500)]
        store = opened.store
        assert isinstance(store, Store)

        def forget(exchange_ids: list[int]) -> None:
            out, _ = opened.run("forget", {
                "confirm": True, "exchange_ids": exchange_ids, "session_id": None,
                "since": None, "until": None, "text": None, "reason": "test",
                "vacuum": False})
            assert out["reply"]["count"] == len(exchange_ids)

        forget(ids[10:20])  # moved into the index: their entries are deleted
        store.keywords.flush(store)
        ids += [ingest(opened, f"conv{n % 5}", text()) for n in range(50)]  # queued
        forget([ids[30], ids[40], ids[-1]])  # queued removals, one of a queued turn
        derived = store.keyword_index()
        assert derived is not None
        w = vocabulary
        expressions = [
            f"{w[0][:3]}*", f"{w[1][:4]}* {w[2]}", f"NEAR({w[0]} {w[1]}, 3)",
            f"NEAR({w[8]} {w[0][:3]}*, 5)", f'NEAR("{w[0]} {w[1]}" {w[2]})',
            f'"{w[0]} {w[1]}"', f'"{w[2]} {w[0]}"* OR {w[5]}', f"{w[4]} + {w[0]}",
            f"{w[6]} AND {w[7]} AND {w[1][:3]}*", f"({w[8]} {w[0]}) OR {w[9]}",
            f"({w[8]} AND NEAR({w[0]} {w[2]}, 2)) OR {w[10]}",
            f'"{w[0]}" OR {w[3]} OR dob*', f"NEAR({w[1]} {w[2]} {w[3]}, 6)"]
        with store.read() as conn:
            sessions = [int(r[0]) for r in conn.execute("SELECT id FROM sessions")]
            compared = 0
            for expression in expressions:
                syntax = derived.syntax(expression)
                assert syntax is not None, expression
                for session in (None, *sessions[:2]):
                    expected = fts5_search.keyword_hits(
                        conn, expression, HitFilter(session_id=session), 100,
                        caller_syntax=True)
                    got = derived.search_syntax(conn, syntax, session, 100)
                    assert got is not None
                    assert [i for i, _ in got] == [i for i, _ in expected], (
                        expression, session)
                    assert [s for _, s in got] == pytest.approx([s for _, s in expected],
                                                                rel=1e-9)
                    assert not {i for i, _ in got} & {*ids[10:20], ids[30], ids[40], ids[-1]}
                    compared += bool(expected)
                    # the search path takes it: the same hits
                    assert keyword_hits(conn, expression, HitFilter(session_id=session), 100,
                                        caller_syntax=True, derived=derived) == got
            assert compared >= 2 * len(expressions)
            # NOT, a column filter, ^, a NEAR group under OR or of phrases that share a
            # token, a month or a year: FTS5's
            for other in (f"{w[0]} NOT {w[1]}", f"body: {w[0]}", f"^{w[0]}",
                          f"NEAR({w[0]} {w[1]}) OR {w[2]}", f"NEAR({w[0]} {w[0][:3]}*)",
                          "may", f"{w[0]} 2024"):
                assert derived.syntax(other) is None, other
            with pytest.raises(FtsSyntaxError) as raised:
                keyword_hits(conn, f"{w[0]}) OR ({w[1]}", HitFilter(), 10,
                             caller_syntax=True, derived=derived)
            with pytest.raises(FtsSyntaxError) as by_fts5:
                fts5_search.keyword_hits(conn, f"{w[0]}) OR ({w[1]}", HitFilter(), 10,
                                         caller_syntax=True)
            assert str(raised.value) == str(by_fts5.value)
    finally:
        opened.close()
