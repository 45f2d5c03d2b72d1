"""The SQLite store on real files (a fresh one per test): schema, permissions, the write
path of a turn, the atomic brief claim, keyword search and the vector cache."""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import apsw
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import store.db
import store.sqlite.vec0
import store.vectors
from nodes.extract.vectors import quantize, text_vector
from stenographer.settings import DEFAULT_VECTOR_DIM
from store.briefs import BriefDraft, ClaimLost, claim_brief, session_briefs
from store.db import Store
from store.errors import StoreError
from store.exchanges import NewTurn, count_live, record_turn, session_row_id
from store.keyword_syntax import fts_phrase
from store.migrations import RECORDED, SCHEMA_VERSION, migrate
from store.runs import PRUNE_EVERY, TraceBuffer, load_trace, save_trace
from store.search import FtsSyntaxError, HitFilter, ids_matching, keyword_hits
from store.sql import Row, all_rows

DIM = DEFAULT_VECTOR_DIM  # what the migrations create and the app opens the store with


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Store]:
    store_ = Store(tmp_path / "data" / "steno.db", vector_dim=DIM)
    try:
        yield store_
    finally:
        store_.close()


def new_turn(content: str, session: str = "s1", *, role: str = "user",
             created_at: float = 1_750_000_000.0, source_key: str | None = None) -> NewTurn:
    return NewTurn(session=session, role=role, content=content,
                   content_hash=hashlib.sha256(content.encode()).digest(),
                   created_at=created_at, vector=quantize(text_vector(content, DIM)),
                   source_key=source_key)


def record(db: Store, *turns: NewTurn) -> list[int]:
    with db.write() as conn:
        return [record_turn(conn, t).exchange_id for t in turns]


def scalar(db: Store, sql: str) -> object:
    with db.read() as conn:
        return conn.execute(sql).fetchone()[0]


# --- schema, file, journal ------------------------------------------------------------------

# As stores of earlier releases recorded them: a store opens without re-migrating only if
# these stay what they are.
SQLITE_NAMES = ["m001_initial", "m002_search_fields", "m003_compact_vectors",
                "m004_provider_vectors", "m005_provenance_chain", "m006_signal_flags",
                "m007_graphrag", "m008_capture", "m009_sync", "m010_forget_derived",
                "m011_bus_outbox", "m012_compact_storage"]


def test_migrations_are_recorded_once_and_idempotent(db: Store):
    expected = list(RECORDED["sqlite"].items())
    assert [n for _, n in expected[:len(SQLITE_NAMES)]] == SQLITE_NAMES
    assert list(RECORDED["postgresql"].values())[:1] == ["p001_initial"]
    conn = db.connection()
    applied = list(conn.execute("SELECT version, name, applied_at FROM schema_migrations"))
    assert [(v, n) for v, n, _ in applied] == expected
    assert migrate(conn) == SCHEMA_VERSION == len(expected)
    assert list(conn.execute("SELECT version, name, applied_at FROM schema_migrations")) \
        == applied  # nothing re-applied, applied_at unchanged
    again = Store(db.path, vector_dim=DIM)  # a second process opening the same file
    try:
        assert list(again.connection().execute(
            "SELECT version, name, applied_at FROM schema_migrations")) == applied
    finally:
        again.close()
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"sessions", "exchanges", "briefs", "brief_sources", "milestones", "runs",
            "exchanges_fts", "exchange_vectors"} <= tables


def test_store_file_and_directory_are_owner_only_whatever_the_umask(tmp_path: Path):
    old = os.umask(0)  # permissions must not depend on the caller's umask
    try:
        db = Store(tmp_path / "fresh" / "steno.db", vector_dim=DIM)
    finally:
        os.umask(old)
    try:
        record(db, new_turn("creates the WAL file"))
        assert stat.S_IMODE((tmp_path / "fresh").stat().st_mode) == 0o700
        for name in ("steno.db", "steno.db-wal", "steno.db-shm"):
            path = tmp_path / "fresh" / name
            if name == "steno.db" or path.exists():
                assert stat.S_IMODE(path.stat().st_mode) == 0o600, name
    finally:
        db.close()


def test_wal_mode_and_foreign_keys_on_every_connection(db: Store):
    modes = []

    def other_thread() -> None:
        conn = db.connection()  # a thread gets its own connection
        modes.append((conn.execute("PRAGMA journal_mode").fetchone()[0],
                      conn.execute("PRAGMA foreign_keys").fetchone()[0]))

    thread = threading.Thread(target=other_thread)
    thread.start()
    thread.join(timeout=10)
    conn = db.connection()
    modes.append((conn.execute("PRAGMA journal_mode").fetchone()[0],
                  conn.execute("PRAGMA foreign_keys").fetchone()[0]))
    assert modes == [("wal", 1), ("wal", 1)]




def _open_on(path: Path) -> int:
    """How many of this process's file descriptors are open on ``path``'s file, its log
    or its shared-memory index."""
    names = {str(path), f"{path}-wal", f"{path}-shm"}
    fds = Path("/proc/self/fd")
    return sum(1 for fd in fds.iterdir() if os.path.realpath(fd) in names)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc (Linux)")
def test_connections_of_ended_threads_are_closed_when_another_opens(db: Store):
    """Each thread has a connection of its own; threads that end (the upkeep's, a thread
    pool's idle workers) must not each leave one open until the store closes: a
    long-lived server would run out of file descriptors."""
    record(db, new_turn("kept across the threads"))
    path = db.path.resolve()
    live = _open_on(path)  # this thread's connection and the store's own
    seen = []

    def short_lived() -> None:
        with db.read() as conn:
            seen.append(conn.execute("SELECT count(*) FROM exchanges").fetchone()[0])

    for _ in range(40):
        thread = threading.Thread(target=short_lived)
        thread.start()
        thread.join(timeout=10)
    assert seen == [1] * 40
    # the last thread's connection is left until the next opens: one more at most
    assert _open_on(path) <= live + 3
    record(db, new_turn("written after them"))  # this thread's connection still works
    assert scalar(db, "SELECT count(*) FROM exchanges") == 2


def test_the_upkeep_and_the_checkpoints_read_past_the_memory_map(db: Store):
    """A page read through the memory map stays resident in the process: the upkeep
    thread (FTS5's merge reads the whole keyword index) and the checkpoints' read into
    their connection's page cache instead, while every other thread keeps the map."""
    record(db, new_turn("a page to read"))
    mapped: dict[str, int] = {}

    def probe(name: str) -> None:
        with db.read() as conn:
            mapped[name] = int(all_rows(conn, "PRAGMA mmap_size")[0][0])
            assert all_rows(conn, "SELECT count(*) FROM exchanges") == [(1,)]

    for name, thread in (("upkeep", db.upkeep), ("checkpoints", db.checkpoints)):
        assert thread.start(lambda name=name: probe(name), name)
        thread.wait()
    other = threading.Thread(target=probe, args=("other",))
    other.start()
    other.join(timeout=10)
    probe("serving")
    assert mapped == {"upkeep": 0, "checkpoints": 0,
                      "other": store.db.MMAP_BYTES, "serving": store.db.MMAP_BYTES}


def test_the_log_is_checkpointed_off_the_committing_thread_and_stays_bounded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A commit that leaves the write-ahead log at CHECKPOINT_PAGES or more does not copy
    it back itself (the checkpoint's fsync would stall the call): the checkpoint thread
    does, and the log restarts instead of growing with every commit."""
    monkeypatch.setattr(store.db, "CHECKPOINT_PAGES", 40)
    monkeypatch.setattr(store.db, "CHECKPOINT_LIMIT", 160)
    ran_on, log_pages = [], []
    checkpoint, committed = Store._checkpoint, Store._committed

    def watched(self: Store) -> None:
        ran_on.append(threading.current_thread())
        checkpoint(self)

    def counted(self: Store, conn: apsw.Connection, name: str, pages: int) -> int:
        log_pages.append(pages)  # frames in the log after each commit
        return committed(self, conn, name, pages)

    monkeypatch.setattr(Store, "_checkpoint", watched)
    monkeypatch.setattr(Store, "_committed", counted)
    path = tmp_path / "steno.db"
    db = Store(path, vector_dim=DIM)
    try:
        # calls with a gap between them (a server's): the thread's checkpoints end in
        # the gaps, and the log restarts below the writer's own limit. First, until one
        # has ended with no reader in the log (the new file's schema is 120 pages).
        for n in range(10):
            record(db, new_turn(f"an early turn {n}"))
            db.checkpoints.wait()
            if log_pages[-1] < 40:
                break
        written = n + 1
        log_pages.clear()
        for n in range(150):
            record(db, new_turn(f"turn {n} " + "words of a turn " * 20, f"s{n % 7}"))
            db.checkpoints.wait()
        assert 40 <= max(log_pages) < 100
        assert ran_on and threading.current_thread() not in ran_on
        # writes back to back (a bulk import): the writer's own checkpoint bounds it
        log_pages.clear()
        for n in range(300):
            record(db, new_turn(f"bulk {n} " + "words of a turn " * 20, f"s{n % 7}"))
        assert 40 <= max(log_pages) < 2 * 160  # 4,500 pages if nothing checkpointed
        db.checkpoints.wait()
    finally:
        db.close()
    reopened = Store(path, vector_dim=DIM)
    try:
        assert scalar(reopened, "SELECT count(*) FROM exchanges") == written + 450
        assert scalar(reopened, "PRAGMA integrity_check") == "ok"
    finally:
        reopened.close()


# --- turns ----------------------------------------------------------------------------------

def test_record_turn_indexes_it_and_source_key_dedups(db: Store):
    with db.write() as conn:
        first = record_turn(conn, new_turn("the ledger balances", source_key="log:1"))
        again = record_turn(conn, new_turn("different text", source_key="log:1"))
        elsewhere = record_turn(conn, new_turn("other session", "s2", source_key="log:1"))
        keyless = [record_turn(conn, new_turn("same text")) for _ in range(2)]
    assert not first.duplicate and first.live_turns == 1
    for dup in (again, elsewhere):  # the key is global: same id, same session, nothing new
        assert dup.duplicate and (dup.exchange_id, dup.session_id) == (
            first.exchange_id, first.session_id)
    assert not any(r.duplicate for r in keyless)
    assert keyless[0].exchange_id != keyless[1].exchange_id
    assert keyless[1].live_turns == 3
    assert scalar(db, "SELECT count(*) FROM exchanges") == 3
    assert scalar(db, "SELECT count(*) FROM exchange_vectors") == 3
    assert scalar(db, "SELECT count(*) FROM sessions") == 1  # s2 was never created
    assert scalar(db, "SELECT turns FROM sessions WHERE name = 's1'") == 3
    with db.read() as conn:
        assert [i for i, _ in keyword_hits(conn, '"ledger"', HitFilter(), 10)] == [
            first.exchange_id]


def test_a_failed_write_transaction_stores_nothing(db: Store):
    with pytest.raises(RuntimeError), db.write() as conn:
        record_turn(conn, new_turn("rolled back"))
        raise RuntimeError("after the insert")
    assert scalar(db, "SELECT count(*) FROM exchanges") == 0
    assert scalar(db, "SELECT count(*) FROM exchange_vectors") == 0
    with db.read() as conn:
        assert keyword_hits(conn, '"rolled"', HitFilter(), 10) == []



def test_a_commit_that_fails_rolls_back_and_the_next_write_begins(db: Store):
    """A deferred constraint fails at COMMIT, where SQLite leaves the transaction open."""
    conn = db.connection()
    conn.execute("CREATE TEMP TABLE parent(id INTEGER PRIMARY KEY);"
                 "CREATE TEMP TABLE child(parent_id INTEGER REFERENCES parent(id)"
                 " DEFERRABLE INITIALLY DEFERRED)")
    with pytest.raises(apsw.ConstraintError), db.write() as conn:
        record_turn(conn, new_turn("not kept"))
        conn.execute("INSERT INTO child VALUES (7)")  # no parent 7: refused at COMMIT
    assert conn.get_autocommit()
    assert scalar(db, "SELECT count(*) FROM exchanges") == 0
    with db.write() as conn:
        record_turn(conn, new_turn("kept"))
    assert scalar(db, "SELECT count(*) FROM exchanges") == 1


# --- briefs ---------------------------------------------------------------------------------

def draft(db: Store, ids: list[int], session: str = "s1", *,
          hashes: dict[int, bytes] | None = None) -> BriefDraft:
    with db.read() as conn:
        stored = dict(conn.execute(
            f"SELECT id, content_hash FROM exchanges WHERE id IN ({','.join('?' * len(ids))})",
            ids))
        session_id = session_row_id(conn, session)
    assert session_id is not None
    hashes = {**stored, **(hashes or {})}
    return BriefDraft(session_id=session_id, tier="B", body="brief body", created_at=1.0,
                      sources=tuple((i, bytes(hashes[i])) for i in ids))


def brief_state(db: Store) -> tuple[object, object, list[tuple[int, int | None]]]:
    with db.read() as conn:
        return (conn.execute("SELECT count(*) FROM briefs").fetchone()[0],
                conn.execute("SELECT count(*) FROM brief_sources").fetchone()[0],
                [tuple(r) for r in conn.execute("SELECT id, brief_id FROM exchanges ORDER BY id")])


def test_claim_brief_marks_every_source_turn(db: Store):
    ids = record(db, *(new_turn(f"turn {i}") for i in range(4)))
    batch = draft(db, ids)
    with db.write() as conn:
        brief_id = claim_brief(conn, batch)
        assert count_live(conn, batch.session_id) == 0
    assert brief_state(db) == (1, 4, [(i, brief_id) for i in ids])
    with db.read() as conn:
        [brief] = session_briefs(conn, batch.session_id, 10)
    assert (brief.id, brief.source_ids, brief.turns) == (brief_id, tuple(ids), 4)
    assert (brief.first_exchange_id, brief.last_exchange_id) == (ids[0], ids[-1])


@pytest.mark.parametrize("lost", ["changed-hash", "already-claimed", "other-session"])
def test_a_lost_claim_leaves_no_brief_and_no_claimed_turn(db: Store, lost: str):
    ids = record(db, *(new_turn(f"turn {i}") for i in range(4)))
    [other] = record(db, new_turn("elsewhere", "s2"))
    batch = draft(db, ids)
    if lost == "changed-hash":
        batch = draft(db, ids, hashes={ids[-1]: b"\0" * 32})
    elif lost == "already-claimed":
        with db.write() as conn:
            claim_brief(conn, draft(db, ids[2:3]))
    else:
        batch = BriefDraft(batch.session_id, "B", "x", 1.0,
                           (*batch.sources, (other, draft(db, [other], "s2").sources[0][1])))
    before = brief_state(db)
    with pytest.raises(ClaimLost), db.write() as conn:
        claim_brief(conn, batch)
    assert brief_state(db) == before  # the whole claim rolled back, the earlier one kept


# --- keyword search -------------------------------------------------------------------------

def test_keyword_hits_are_ranked_and_scoped(db: Store):
    a = record(db, new_turn("ledger ledger ledger review", role="user", created_at=100.0),
               new_turn("ledger mentioned once among many other words here", role="assistant",
                        created_at=200.0),
               new_turn("unrelated", created_at=300.0))
    b = record(db, new_turn("ledger in the second session", "s2", created_at=150.0))
    with db.read() as conn:
        s1 = session_row_id(conn, "s1")

        def ids(flt: HitFilter, expression: str = '"ledger"') -> list[int]:
            hits = keyword_hits(conn, expression, flt, 50)
            scores = [s for _, s in hits]
            assert scores == sorted(scores, reverse=True)  # best first, higher is better
            return [i for i, _ in hits]

        assert ids(HitFilter(session_id=s1)) == [a[0], a[1]]
        assert sorted(ids(HitFilter())) == sorted([a[0], a[1], b[0]])
        assert ids(HitFilter(session_id=s1, role="assistant")) == [a[1]]
        assert sorted(ids(HitFilter(since=150.0))) == sorted([a[1], b[0]])
        assert sorted(ids(HitFilter(until=150.0))) == [a[0]]
        assert ids(HitFilter(session_id=s1, compressed_only=True)) == []
        assert ids(HitFilter(session_id=s1), '"ledger" AND "review"') == [a[0]]
        assert ids(HitFilter(session_id=s1), "NEAR(ledger review, 2)") == [a[0]]
        assert ids(HitFilter(session_id=s1), "ledg*") == [a[0], a[1]]
    with db.write() as conn:
        claim_brief(conn, draft(db, a[:2]))
    live = record(db, new_turn("ledger after the brief", created_at=400.0))
    with db.read() as conn:
        assert live[0] in ids(HitFilter(session_id=s1))
        assert sorted(ids(HitFilter(session_id=s1, compressed_only=True))) == sorted(a[:2])
        assert sorted(ids(HitFilter(compressed_only=True))) == sorted(a[:2])  # all sessions
        assert ids(HitFilter(session_id=s1, compressed_only=True, role="assistant")) == [a[1]]
        every = [*a, *b, *live]  # the filter for vector hits agrees
        assert ids_matching(conn, every, HitFilter(session_id=s1, compressed_only=True)) == {
            a[0], a[1]}
        assert ids_matching(conn, every, HitFilter(compressed_only=True)) == {a[0], a[1]}
        assert ids_matching(conn, every, HitFilter(session_id=s1)) == {*a, *live}
        assert ids_matching(conn, every, HitFilter(session_id=s1, compressed_only=True,
                                                   role="assistant")) == {a[1]}


BAD_EXPRESSIONS = ['"unbalanced', "AND", "OR OR", "(", ")", "NEAR(", "^^", "*", "* x",
                   "NEAR(a b, x", "x:y", "{nosuch}: x", "a AND (b OR", "NOT"]


@pytest.mark.parametrize("expression", BAD_EXPRESSIONS)
@pytest.mark.parametrize("scoped", [True, False], ids=["session", "all-sessions"])
def test_invalid_fts_syntax_raises_fts_syntax_error(db: Store, expression: str, scoped: bool):
    record(db, new_turn("x a b"))
    with db.read() as conn, pytest.raises(FtsSyntaxError):
        keyword_hits(conn, expression, HitFilter(session_id=1 if scoped else None), 10)


FTS_TOKENS = ['"', "(", ")", "AND", "OR", "NOT", "NEAR", "NEAR(", "*", "^", ":", "col:",
              "scope:", "{", "}", "-", "+", ",", "x", "5", "99999999999999999999", "é", "."]


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.text(max_size=40),
                 st.lists(st.sampled_from(FTS_TOKENS), max_size=8).map(" ".join),
                 st.lists(st.sampled_from(FTS_TOKENS), max_size=8).map("".join)))
def test_any_expression_either_runs_or_raises_fts_syntax_error(db: Store, expression: str):
    with db.read() as conn:
        for flt in (HitFilter(), HitFilter(session_id=1)):
            try:
                keyword_hits(conn, expression, flt, 5)
            except FtsSyntaxError:
                pass
        # Quoted, any text runs. (Not NUL: FTS5 reads the expression as a C string, so
        # fts_phrase("\0") is an unterminated string; queries reach it only as \w+ words.)
        keyword_hits(conn, fts_phrase(expression.replace("\0", "")), HitFilter(session_id=1), 5)


# --- vectors --------------------------------------------------------------------------------

def test_vector_cache_knn_refreshes_incrementally(db: Store, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(store.vectors, "_GROW", 2)  # exercise the buffer growth too
    texts = ["postgres vacuum settings", "react hooks rerender", "kubernetes ingress tls"]
    ids = record(db, *(new_turn(t) for t in texts))
    cache = db.vectors

    def knn(query: str, k: int = 10, session: int | None = None) -> list[tuple[int, float]]:
        with db.read() as conn:
            hits = cache.knn(conn, text_vector(query, DIM), k, session)
        scores = [s for _, s in hits]
        assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)
        assert len(hits) <= k
        return hits

    assert knn("postgres vacuum")[0][0] == ids[0]
    assert cache._n == 3  # internal: rows loaded so far
    more = record(db, new_turn("postgres autovacuum tuning"), new_turn("vacuum", "s2"))
    top = [i for i, _ in knn("postgres vacuum", k=2)]
    assert cache._n == 5  # only the two new rows were read
    assert set(top) <= {ids[0], more[0], more[1]} and ids[0] in top
    with db.read() as conn:
        s2 = session_row_id(conn, "s2")
    assert [i for i, _ in knn("vacuum", session=s2)] == [more[1]]
    with db.read() as conn:
        assert cache.knn(conn, np.zeros(DIM, dtype=np.float32), 5) == []
    cache.forget()
    assert knn("kubernetes ingress")[0][0] == ids[2]
    assert cache._n == 5


def test_a_cold_vector_copy_read_from_vec0_chunks_equals_the_row_by_row_one(
        db: Store, monkeypatch: pytest.MonkeyPatch):
    # Three vec0 chunks (1,024 slots each), two sessions interleaved, holes from deletions.
    turns = [new_turn(f"note {i} about {'postgres' if i % 3 else 'react'} {i * 7919 % 1000}",
                      session=f"s{i % 2}") for i in range(2_300)]
    ids = record(db, *turns)
    with db.write() as conn:
        for gone in (ids[0], ids[1_500], ids[-1]):
            conn.execute("DELETE FROM exchange_vectors WHERE rowid = ?", (gone,))
    with db.read() as conn:
        mapped = all_rows(conn, "PRAGMA mmap_size")
        bulk = store.sqlite.vec0.vec0_chunks(conn)  # read past the memory map, then as was
        assert all_rows(conn, "PRAGMA mmap_size") == mapped and mapped[0][0] > 0
        rows = all_rows(conn, store.vectors.SELECT_NEW, (0,))
    assert bulk is not None
    got_ids, got_sessions, got_vectors = bulk
    assert got_ids.tolist() == [r[0] for r in rows] and len(rows) == 2_297
    assert got_sessions.tolist() == [r[1] for r in rows]
    assert [v.tobytes() for v in got_vectors] == [bytes(r[2]) for r in rows]

    def top(cache: store.vectors.VectorCache, query: str, session: int | None = None
            ) -> list[tuple[int, float]]:
        with db.read() as conn:
            return cache.knn(conn, text_vector(query, DIM), 20, session)

    cold, warm = store.vectors.VectorCache(DIM), store.vectors.VectorCache(DIM)
    monkeypatch.setattr(warm, "everything", lambda conn: None)  # warm: row by row
    for query, session in (("postgres 42", None), ("react", 1), ("note 7", 2)):
        assert top(cold, query, session) == top(warm, query, session)
    assert cold._n == warm._n == 2_297
    added = record(db, new_turn("postgres brand new"))  # then incrementally, as before
    assert top(cold, "postgres brand new")[0][0] == added[0] and cold._n == 2_298

    # A layout read differently from vec0's own answers (here: sampled rows disagree),
    # or another layout of its tables (here: missing), falls back to the row-by-row read.
    monkeypatch.setattr(store.sqlite.vec0, "SELECT_ONE", store.sqlite.vec0.SELECT_ONE.replace(
        "SELECT session_id,", "SELECT session_id + 1,"))
    with db.read() as conn:
        assert store.sqlite.vec0.vec0_chunks(conn) is None
    monkeypatch.setattr(store.sqlite.vec0, "SELECT_CHUNKS", "SELECT * FROM no_such_chunks")
    with db.read() as conn:
        assert store.sqlite.vec0.vec0_chunks(conn) is None
    other = store.vectors.VectorCache(DIM)
    assert top(other, "postgres brand new")[0][0] == added[0] and other._n == 2_298


def test_the_vector_copy_holds_the_stored_int8_rows_and_scores_them_exactly(db: Store):
    # 3 sessions interleaved; a cold copy (vec0 chunks), then rows appended to it.
    turns = [new_turn(f"turn {i} on {('postgres', 'react', 'kafka')[i % 3]} {i * 31 % 97}",
                      session=f"s{i % 3}") for i in range(300)]
    record(db, *turns)
    with db.read() as conn:
        stored = all_rows(conn, store.vectors.SELECT_NEW, (0,))
    cache = store.vectors.VectorCache(DIM)
    query = text_vector("postgres 42 turn", DIM)

    def expected(rows: list[Row], k: int) -> list[tuple[int, float]]:
        # what a float32 copy of the stored rows ranks (rows / 127, then the product)
        mat = np.array([np.frombuffer(bytes(r[2]), dtype=np.int8) for r in rows],
                       dtype=np.float32) / np.float32(127.0)
        scores = mat @ query.astype(np.float64)
        order = sorted(range(len(rows)), key=lambda i: (-scores[i], i))[:k]
        return [(int(rows[i][0]), float(scores[i])) for i in order if scores[i] > 0]

    def check(rows: list[Row], session: int | None) -> None:
        with db.read() as conn:
            got = cache.knn(conn, query, 15, session)
        want = expected(rows, 15)
        exact = dict(expected(rows, len(rows)))
        # the same scores, best first (turns whose scores differ by float rounding
        # only may swap places)
        assert np.allclose([s for _, s in got], [s for _, s in want], rtol=0, atol=1e-6)
        assert all(abs(exact[i] - s) <= 1e-6 for i, s in got)

    with db.read() as conn:
        sessions = {name: session_row_id(conn, name) for name in ("s0", "s1", "s2")}
    check(stored, None)
    for sid in sessions.values():
        check([r for r in stored if r[1] == sid], sid)
    assert cache._cols.dtype == np.int8  # internal: a quarter of a float32 copy
    assert cache.nbytes == cache._cols.shape[1] * DIM
    record(db, *(new_turn(f"postgres 42 turn again {i}", session=f"s{i % 2}")
                 for i in range(5)))
    with db.read() as conn:
        stored = all_rows(conn, store.vectors.SELECT_NEW, (0,))
    for sid in sessions.values():
        check([r for r in stored if r[1] == sid], sid)
    check(stored, None)
    with db.read() as conn:
        assert cache.knn(conn, query, 5, session_id=10**9) == []  # no such session


def _exact_scan(cache: store.vectors.MatrixCache, query: np.ndarray, k: int,
                positions: np.ndarray) -> list[tuple[int, float]]:
    """What the one-pass scan of every row gave: whole rows times the query, divided by
    127, the best k (ties by position)."""
    every_row = np.ascontiguousarray(cache._cols[:, : cache._n].T)
    scores = np.einsum("ij,j->i", every_row, query.astype(np.float32),
                       dtype=np.float32)[positions] / np.float32(127.0)
    order = np.argsort(-scores, kind="stable")[:k]
    order = order[scores[order] > 0]
    return list(zip(cache._ids[positions][order].tolist(), scores[order].tolist(),
                    strict=True))


# the words of the generated turns of the KNN tests
VOCAB = ["postgres", "vacuum", "react", "hooks", "kafka", "lag", "ingress", "tls", "deploy",
         "cache", "index", "timeout", "retry", "schema", "migration"]


def test_the_two_pass_search_returns_the_exact_top_k_with_the_exact_scores(
        db: Store, monkeypatch: pytest.MonkeyPatch):
    # A real store of 2,400 turns in 4 interleaved sessions, then 1,200 of a fifth in one
    # run (its first pass reads slices of the copy, the others' take their rows); the
    # sample that sets the first pass's threshold and the block it reads at a time made
    # small, so that a store this size takes the path a million rows do.
    def text(i: int) -> str:
        return (" ".join(VOCAB[(i * 7 + j * j) % len(VOCAB)] for j in range(i % 9 + 3))
                + f" item {i % 50}")

    record(db, *(new_turn(text(i), session=f"s{i % 4}") for i in range(2_400)))
    record(db, *(new_turn(text(i * 13), session="s4") for i in range(1_200)))
    cache = store.vectors.VectorCache(DIM)
    queries = ["postgres vacuum", "why does the kafka consumer lag", "tls", "item 7",
               "react hooks cache index migration schema retry timeout deploy"]
    with db.read() as conn:
        sessions = [session_row_id(conn, f"s{i}") for i in range(5)]
        cache.knn(conn, text_vector("warm", DIM), 1)
    run = cache._session_rows(sessions[4])
    assert run[-1] - run[0] + 1 == len(run)  # internal: one run of positions
    for sample, block in ((store.vectors._SAMPLE, store.vectors._BLOCK), (64, 500)):
        monkeypatch.setattr(store.vectors, "_SAMPLE", sample)
        monkeypatch.setattr(store.vectors, "_BLOCK", block)
        for text in queries:
            query = text_vector(text, DIM)
            for k in (1, 10, 100, 400):
                for session in (None, *sessions):
                    with db.read() as conn:
                        got = cache.knn(conn, query, k, session)
                    positions = (np.arange(cache._n) if session is None
                                 else cache._session_rows(session))
                    want = _exact_scan(cache, query, k, positions)
                    # the same scores, bit for bit; among equal scores any order
                    assert [s for _, s in got] == [s for _, s in want], (text, k, session)
                    exact = dict(_exact_scan(cache, query, len(positions), positions))
                    assert all(exact[i] == s for i, s in got)


def test_a_knn_leaves_out_the_turns_it_is_given_and_stays_exact(db: Store):
    # A session's compressed turns are all but its live ones: the KNN leaves those out
    # itself. Its hits are the exact best k of the other rows, bit for bit, and, while
    # few are left out, what a wider KNN with them filtered out afterwards gave.
    turns = [new_turn(" ".join(VOCAB[(i * 5 + j * j) % len(VOCAB)] for j in range(i % 7 + 2))
                      + f" item {i % 40}", session=f"s{i % 3}") for i in range(1_800)]
    record(db, *turns)
    cache = store.vectors.VectorCache(DIM)
    with db.read() as conn:
        sessions = [session_row_id(conn, f"s{i}") for i in range(3)]
        cache.knn(conn, text_vector("warm", DIM), 1)
    for text in ("postgres vacuum", "why does the kafka consumer lag", "item 7"):
        query = text_vector(text, DIM)
        for session in sessions:
            assert session is not None
            rows = cache._session_rows(session)
            ids = cache._ids[rows]
            for left in (set(), set(ids[::37].tolist()), set(ids[:450].tolist())):
                kept = rows[~np.isin(ids, list(left))]
                for k in (10, 100, 400):
                    with db.read() as conn:
                        got = cache.knn(conn, query, k, session, leave_out=left)
                        wide = cache.knn(conn, query, 4 * k, session)
                    assert not {i for i, _ in got} & left
                    want = _exact_scan(cache, query, k, kept)
                    assert [s for _, s in got] == [s for _, s in want], (text, k, len(left))
                    after = [h for h in wide if h[0] not in left]
                    if len(after) >= k or len(wide) < 4 * k:
                        assert got == after[:k]


def test_the_first_pass_candidates_cover_the_exact_top_k():
    rng = np.random.default_rng(5)
    # the whole array partitioned (below 32 k), or a sample of every 8th score or sparser
    for n, k in ((10, 20), (300, 10), (1_000, 10), (3_199, 100), (3_200, 100),
                 (21_000, 100), (50_000, 400), (300_000, 100), (300_000, 400)):
        scores = (rng.standard_normal(n) * 40).astype(np.float32)
        scores[rng.integers(0, n, n // 10)] = 17.0  # many ties, some at the boundary
        for slack in (0.0, 0.5):
            picked = store.vectors.candidates(scores, k, slack)
            assert (np.diff(picked) > 0).all()  # ascending positions, no repeat
            best = np.sort(scores)[::-1]
            low = max(float(best[min(k, n) - 1]), 0.0) - slack if n > k else -slack
            want = np.flatnonzero(scores >= low) if n > k else np.flatnonzero(scores > low)
            assert picked.tolist() == want.tolist()
    # a store where fewer than k rows are positive: every row that could be
    scores = np.full(200_000, -3.0, dtype=np.float32)
    scores[[5, 70_000]] = 2.0, 0.001
    assert store.vectors.candidates(scores, 100, 0.01).tolist() == [5, 70_000]


def test_the_copy_refuses_a_changed_dimension_until_forgotten(db: Store):
    from store.provider_vectors import INSERT_VECTOR, ProviderCache

    ids = record(db, *(new_turn(f"turn {i}", session=f"s{i % 2}") for i in range(6)))
    rng = np.random.default_rng(3)

    def store_vectors(width: int, which: list[int]) -> dict[int, np.ndarray]:
        rows = {i: rng.integers(-127, 128, width).astype(np.int8) for i in which}
        with db.write() as conn:
            for i, row in rows.items():
                conn.execute(INSERT_VECTOR, (i, "m", row.tobytes()))
        return rows

    def best(cache: ProviderCache, query: np.ndarray) -> list[tuple[int, float]]:
        with db.read() as conn:
            return cache.knn(conn, query, 3)

    eight = store_vectors(8, ids[:4])
    cache = ProviderCache("m")
    query = eight[ids[2]].astype(np.float32) / np.linalg.norm(eight[ids[2]])
    assert best(cache, query)[0][0] == ids[2] and cache.dim == 8
    sixteen = store_vectors(16, ids)  # re-embedded with another model's width
    with pytest.raises(StoreError, match=r"changed dimension \(8 -> 16\)"):
        best(cache, query)
    cache.forget()
    with pytest.raises(StoreError, match="8-component query against 16-component"):
        best(cache, query)
    query = sixteen[ids[5]].astype(np.float32) / np.linalg.norm(sixteen[ids[5]])
    got = best(cache, query)
    assert got[0][0] == ids[5] and cache.dim == 16 and cache._n == 6
    assert got == _exact_scan(cache, query, 3, np.arange(6))


# --- traces ---------------------------------------------------------------------------------

def test_traces_round_trip_and_keep_bounded_retention(db: Store):
    retention = 10
    with db.write() as conn:
        for n in range(PRUNE_EVERY):
            save_trace(conn, {"run_id": f"{n:032x}", "graph": "g", "status": "Completed",
                              "duration_ms": 1.0, "stages": []}, float(n), retention)
    with db.read() as conn:
        kept = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
        assert load_trace(conn, f"{PRUNE_EVERY - 1:032x}") == {
            "run_id": f"{PRUNE_EVERY - 1:032x}", "graph": "g", "status": "Completed",
            "duration_ms": 1.0, "stages": []}
        assert load_trace(conn, f"{0:032x}") is None
    assert kept == retention


def test_flush_returns_only_when_pending_traces_are_stored(db: Store):
    entered, release = threading.Event(), threading.Event()

    @contextmanager
    def slow_write() -> Iterator[object]:
        with db.write() as conn:
            entered.set()
            release.wait(10)
            yield conn

    buffer = TraceBuffer(slow_write, interval=3_600)  # the background writer stays idle
    trace = {"run_id": "a" * 32, "graph": "g", "status": "Completed", "duration_ms": 0.0,
             "stages": []}
    found: list[object] = []

    def flush_then_read() -> None:
        buffer.flush()
        with db.read() as conn:
            found.append(load_trace(conn, trace["run_id"]))

    try:
        buffer.add(trace, 1.0, 100)
        first = threading.Thread(target=buffer.flush)  # plays the background writer
        first.start()
        assert entered.wait(10)
        second = threading.Thread(target=flush_then_read)  # plays the trace graph
        second.start()
        second.join(timeout=1.0)  # bounded: a correct flush() is still waiting here
        release.set()
        first.join(timeout=10)
        second.join(timeout=10)
        assert found == [trace]
    finally:
        release.set()
        buffer.close()
