"""`stenographer migrate`: SQLite → PostgreSQL → SQLite keeps every row, hash, vector and
search result; an interrupted copy (SIGINT, SIGKILL) resumes to the same result; a
target that is not empty, or a copy of another store, is refused untouched; a damaged
source stops the copy at the bad turn; the audit passes on the target.

Real SQLite files, a real PostgreSQL server (the ``postgres_server`` fixture) and the
command run as a subprocess.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

from stenographer.app import open_app
from stenographer.settings import Settings
from store.backend import Backend, open_store
from store.db import Store
from store.keyword_index import META_KEY as KEYWORD_INDEX_KEY
from store.provider_vectors import save_provider_vectors
from store.rewrite import REWRITE_KEYS
from store.transfer import MIGRATION_KEY, TABLES, key_of, read_page, read_progress
from tests.cli.conftest import REPO_ROOT, TIMEOUT, Result, cli_env, run_cli

DRIFT = "Trust me, the user said it's fine, so we can skip the tests. They probably mean prod."
TEXTS = [
    "The deploy pipeline takes forty minutes. Can we make it faster?",
    "Most of the time goes to building the Docker image without a cache.",
    "Decision: we enable BuildKit layer caching in the deploy pipeline.",
    "Blocked: the CI runners have no persistent disk for the cache.",
    "We went with registry-backed caching; the build is down to 6 minutes.",
    "Annual invoices show the monthly price. Why?",
    "Decision: the invoice amount comes from the billing period.",
    "SQLite or Postgres for the team server? We chose Postgres with pgvector.",
]
SEARCHES = [("deploy pipeline cache", "keyword"), ("why do invoices show the price", "hybrid"),
            ("Postgres for the team", "semantic"), ("BuildKit", "hybrid"),
            ("when did we decide on caching", "hybrid")]


# --- a source store with rows in every table ------------------------------------------------

def seed_every_table(data_dir: Path, turns: int) -> None:
    """Turns in three sessions (briefs, NAFE flags, a milestone, a forgotten turn), the
    GraphRAG graph, a capture cursor, provider vectors, and turns re-linked from another
    store (sync origins)."""
    other = data_dir.parent / f"{data_dir.name}-peer"
    peer = open_app(Settings(data_dir=other))
    try:
        for n in range(3):
            peer.run("ingest", {"role": "user", "content": f"The peer's note {n} on caching.",
                                "session_id": "alpha"})
        peer.run("sync_export", {"path": str(other / "peer.zst")})
    finally:
        peer.close()
    app = open_app(Settings(data_dir=data_dir, turn_limit=4))
    try:
        ids = []
        for n in range(turns):
            out, _ = app.run("ingest", {
                "role": ("user", "assistant")[n % 2],
                "content": DRIFT if n == 7 else f"{TEXTS[n % len(TEXTS)]} (turn {n})",
                "session_id": ("alpha", "beta", "gamma")[n % 3],
                "created_at": f"2026-{1 + n % 12:02d}-{1 + n % 28:02d}T10:{n % 60:02d}:00Z"})
            ids.append(out["reply"]["exchange_id"])
        app.run("milestone", {"session_id": "alpha", "exchange_id": ids[0], "label": "start"})
        app.run("forget", {"exchange_ids": [ids[4]], "confirm": True, "reason": "test"})
        app.run("sync_import", {"path": str(other / "peer.zst")})
        app.run("graphrag_batch", {})
        app.run("graphrag_communities", {})
        app.run("capture_commit", {"kind": "codex", "path": "/t/rollout.jsonl", "position": 10,
                                   "lines": 1, "captured": 1, "identity": "1:2", "head": "ab",
                                   "session": "x"})
        with app.store.write() as conn:
            save_provider_vectors(conn, "test-model", 0, ids[2],
                                  [(i, bytes([i % 100]) * 16) for i in ids[:3]])
    finally:
        app.close()


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The data directory of a store with rows in every table the copy handles."""
    data_dir = tmp_path_factory.mktemp("source") / "data"
    seed_every_table(data_dir, turns=60)
    store = open_store(data_dir / "steno.db")
    try:
        empty = [t for t, rows in dump(store).items() if not rows]
    finally:
        store.close()
    assert not empty, f"the seed leaves {empty} empty: the round trip would not cover them"
    return data_dir


# --- reading a store without the application ------------------------------------------------

def dump(store: Backend) -> dict[str, list[tuple[Any, ...]]]:
    """Every copied table in key order; the target's own rows left out (its progress row,
    the state of its file's rewrite after a forget, its run numbers)."""
    tables: dict[str, list[tuple[Any, ...]]] = {}
    with store.read() as conn:
        for table in TABLES:
            rows: list[tuple[Any, ...]] = []
            after = None
            while page := read_page(conn, table.name, after, 1000):
                rows += page
                after = key_of(table.name, page[-1])
            tables[table.name] = rows
        vectors = [tuple(r) for r in conn.execute(
            "SELECT rowid, embedding::text FROM exchange_vectors ORDER BY rowid"
            if store.dialect == "postgresql" else
            "SELECT rowid, embedding FROM exchange_vectors ORDER BY rowid")]
    tables["meta"] = [r for r in tables["meta"]
                      if r[0] not in (MIGRATION_KEY, *REWRITE_KEYS, KEYWORD_INDEX_KEY)]
    tables["runs"] = sorted(r[1:] for r in tables["runs"])  # the target numbers them
    tables["vectors"] = [(i, _int8(v)) for i, v in vectors]
    return tables


def _int8(value: Any) -> list[int]:
    if isinstance(value, str):  # pgvector's text form
        return [int(float(x)) for x in value.strip("[]").split(",")]
    return [b - 256 if b > 127 else b for b in bytes(value)]


def assert_same_record(source: dict[str, Any], target: dict[str, Any]) -> None:
    for name, rows in source.items():
        if name == "runs":  # the target adds the traces of the copy itself
            assert set(rows) <= set(target["runs"])
        else:
            assert target[name] == rows, f"{name} differs"


def opened(data_dir: Path | None = None, url: str | None = None) -> Backend:
    return open_store(Path(data_dir or "/nonexistent") / "steno.db", database_url=url)


def searches(data_dir: Path) -> list[list[tuple[Any, ...]]]:
    app = open_app(Settings(data_dir=data_dir))
    try:
        # Every turn in the derived keyword index, none in its queue: queued turns score a
        # little differently (the index's statistics leave them out), so the copy, whose
        # turns are all queued, is compared with the source in the same state.
        derived = app.store.keyword_index()
        assert derived is not None and isinstance(app.store, Store)
        derived.wait()
        derived.flush(app.store)
        found = []
        for query, mode in SEARCHES:
            out, _ = app.run("search", {"query": query, "mode": mode, "cross_session": True,
                                        "limit": 10})
            found.append([(h["exchange_id"], round(h["score"], 9), h.get("brief_id"))
                          for h in out["hits"]])
        return found
    finally:
        app.close()


def migrate(data_dir: Path, *args: str) -> Result:
    return run_cli(data_dir, "migrate", *args, "--json")


def expect_copied(result: Result) -> dict[str, Any]:
    """The copy finished (every table's rows counted at the start were written) and the
    audit passed on the target."""
    assert result.code == 0, result.out + result.err
    reply = result.json()
    for table, total in reply["total"].items():
        if table != "meta":  # the target keeps its own vector_dim and progress rows
            assert reply["copied"].get(table, 0) == total, (table, reply)
    assert reply["audit"]["passed"] is True
    return dict(reply)


# --- the round trip -------------------------------------------------------------------------

def test_sqlite_to_postgresql_to_sqlite_keeps_every_row_hash_vector_and_search_result(
        source: Path, postgres_server: Any, tmp_path: Path):
    url = postgres_server.database()
    there = expect_copied(migrate(source, "--to", url, "--batch", "7"))
    assert there["resumed"] is False and there["turns_this_run"] == there["total"]["exchanges"]
    back_dir = tmp_path / "back"
    back = expect_copied(migrate(source, "--from", url, "--to", str(back_dir / "steno.db"),
                                 "--batch", "5"))
    assert back["copied"]["exchanges"] == there["copied"]["exchanges"]

    original_store, pg_store, back_store = opened(source), opened(url=url), opened(back_dir)
    try:
        original = dump(original_store)
        assert_same_record(original, dump(pg_store))
        assert_same_record(original, dump(back_store))
        with pg_store.read() as conn:  # dropped for the copy, built again at its end
            assert conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = "
                                "'exchanges_fts_doc'").fetchone() is not None
            # analyzed at the end, as after a bulk write: the planner knows every turn
            assert conn.execute("SELECT reltuples FROM pg_class WHERE oid = "
                                "'exchanges'::regclass").fetchone()[0] == len(
                                    original["exchanges"]) > 50
    finally:
        for store in (original_store, pg_store, back_store):
            store.close()
    assert searches(back_dir) == searches(source)

    # New turns continue after every copied id and tombstone, on both backends.
    for settings in (Settings(data_dir=tmp_path / "pg", database_url=url),
                     Settings(data_dir=back_dir)):
        app = open_app(settings)
        try:
            out, _ = app.run("ingest", {"role": "user", "content": "after the move",
                                        "session_id": "alpha"})
        finally:
            app.close()
        assert out["reply"]["exchange_id"] == max(r[0] for r in original["exchanges"]) + 1


def test_a_finished_copy_is_not_copied_again(source: Path, tmp_path: Path):
    target = str(tmp_path / "copy.db")
    expect_copied(migrate(source, "--to", target))
    again = migrate(source, "--to", target)
    assert again.code == 0
    reply = again.json()
    assert reply["resumed"] is True and reply["turns_this_run"] == 0
    text = run_cli(source, "migrate", "--to", target)
    assert "already holds a complete copy" in text.out and "all 11 contracts hold" in text.out


def test_the_audit_passes_on_the_target(source: Path, database_url: str | None,
                                        tmp_path: Path):
    result = migrate(source, "--to", database_url or str(tmp_path / "copy.db"))
    reply = result.json()
    assert reply["audit_error"] is None, reply["audit_error"]
    assert reply["audit"]["passed"] is True and result.code == 0
    assert "all 11 contracts hold" in reply["audit"]["text"]


# --- interrupted copies ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def long_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Enough turns that a copy in pages of two takes many transactions."""
    data_dir = tmp_path_factory.mktemp("long") / "data"
    app = open_app(Settings(data_dir=data_dir, turn_limit=6))
    try:
        for n in range(240):
            app.run("ingest", {"role": ("user", "assistant")[n % 2],
                               "content": f"{TEXTS[n % len(TEXTS)]} (turn {n})",
                               "session_id": f"s{n % 5}"})
    finally:
        app.close()
    return data_dir


def progress(target: str, url: str | None) -> dict[str, Any] | None:
    """The target's progress row, read as another client would (None: not started)."""
    try:
        if url is not None:
            import psycopg

            with psycopg.connect(url, connect_timeout=5) as conn:
                row = conn.execute("SELECT value FROM meta WHERE key = %s",
                                   (MIGRATION_KEY,)).fetchone()
            return None if row is None else dict(json.loads(row[0]))
        conn = apsw.Connection(target, flags=apsw.SQLITE_OPEN_READONLY)
        try:
            conn.set_busy_timeout(1000)
            text = read_progress(conn)
        finally:
            conn.close()
        return None if text is None else dict(json.loads(text))
    except Exception:  # the target is still being created
        return None


def _default_sigint() -> None:
    """A shell that runs the tests in the background makes them ignore SIGINT, and the
    command would inherit that: give it the default action (Python's KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def stop_mid_copy(data_dir: Path, target: str, url: str | None, how: signal.Signals,
                  past: int) -> tuple[int, str, dict[str, Any]]:
    """Start a copy, wait until more than ``past`` turns are committed, send ``how``."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "stenographer", "migrate", "--to", target, "--batch", "2"],
        cwd=REPO_ROOT, env=cli_env(data_dir), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)
    deadline = time.monotonic() + TIMEOUT
    try:
        while True:
            assert proc.poll() is None, f"the copy ended before it was stopped: {proc.stderr}"
            assert time.monotonic() < deadline, "the copy made no progress"
            found = progress(target, url)
            if found is not None and found["copied"].get("exchanges", 0) > past:
                break
            time.sleep(0.01)
        proc.send_signal(how)
        _, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=TIMEOUT)
    stopped = progress(target, url)
    assert stopped is not None
    return proc.returncode, err, stopped


def test_an_interrupted_copy_resumes_without_duplicates(long_source: Path,
                                                        database_url: str | None,
                                                        tmp_path: Path):
    target = database_url or str(tmp_path / "copy.db")
    code, err, first = stop_mid_copy(long_source, target, database_url, signal.SIGINT, 0)
    assert code == 130 and "run the same command again to resume" in err, err
    assert first["table"] == "exchanges" and first["finished_at"] is None
    code, _, second = stop_mid_copy(long_source, target, database_url, signal.SIGKILL,
                                     first["copied"]["exchanges"])
    assert code == -signal.SIGKILL
    assert second["finished_at"] is None
    assert second["copied"]["exchanges"] > first["copied"]["exchanges"]

    reply = expect_copied(migrate(long_source, "--to", target))
    assert reply["resumed"] is True
    assert reply["turns_this_run"] == 240 - second["copied"]["exchanges"]
    source_store = opened(long_source)
    target_store = opened(url=database_url) if database_url else open_store(Path(target))
    try:
        assert_same_record(dump(source_store), dump(target_store))
    finally:
        source_store.close()
        target_store.close()


# --- refusals -------------------------------------------------------------------------------

def _counts(store: Backend) -> dict[str, int]:
    return {t: len(rows) for t, rows in dump(store).items() if t != "runs"}


@pytest.fixture
def other_store(database_url: str | None, tmp_path: Path) -> Iterator[tuple[str, str | None]]:
    """A store with records of its own: (what --to names, its URL or None)."""
    data_dir = tmp_path / "other"
    app = open_app(Settings(data_dir=data_dir, database_url=database_url))
    try:
        app.run("ingest", {"role": "user", "content": "a turn of another store",
                           "session_id": "elsewhere"})
    finally:
        app.close()
    yield (database_url or str(data_dir / "steno.db")), database_url


def test_a_target_with_records_of_its_own_is_refused_untouched(
        source: Path, other_store: tuple[str, str | None]):
    target, url = other_store
    store = open_store(Path(target)) if url is None else opened(url=url)
    try:
        before = _counts(store)
    finally:
        store.close()
    result = migrate(source, "--to", target)
    assert result.code == 2
    message = result.json()["error"]["message"]
    assert "is not empty (it holds sessions, exchanges" in message
    assert "Migrate into a new SQLite file or an empty PostgreSQL database" in message
    store = open_store(Path(target)) if url is None else opened(url=url)
    try:
        assert _counts(store) == before
    finally:
        store.close()


def test_a_copy_of_another_store_is_refused(source: Path, long_source: Path, tmp_path: Path):
    target = str(tmp_path / "copy.db")
    proc_code, _, _ = stop_mid_copy(long_source, target, None, signal.SIGKILL, 0)
    assert proc_code == -signal.SIGKILL
    result = migrate(source, "--to", target)
    assert result.code == 2
    assert f"holds a copy of {long_source / 'steno.db'}, not of {source / 'steno.db'}" in \
        result.json()["error"]["message"]


def test_the_same_store_and_a_missing_source_are_refused(source: Path, tmp_path: Path):
    same = migrate(source, "--to", str(source))
    assert same.code == 2 and "the same store" in same.json()["error"]["message"]
    missing = migrate(source, "--from", str(tmp_path / "nothing.db"), "--to",
                      str(tmp_path / "copy.db"))
    assert missing.code == 2 and "there is no store at" in missing.json()["error"]["message"]
    assert not (tmp_path / "nothing.db").exists()
    # A page size out of range is refused before the target is created.
    big = migrate(source, "--to", str(tmp_path / "big.db"), "--batch", "100001")
    assert big.code == 2 and "1 to 100000" in big.json()["error"]["message"]
    assert not (tmp_path / "big.db").exists()


def test_a_damaged_turn_stops_the_copy_before_its_page(long_source: Path, tmp_path: Path):
    damaged = tmp_path / "damaged"
    damaged.mkdir(mode=0o700)
    src = apsw.Connection(str(long_source / "steno.db"))
    try:
        src.execute("VACUUM INTO ?", (str(damaged / "steno.db"),))
    finally:
        src.close()
    conn = apsw.Connection(str(damaged / "steno.db"))
    try:
        victim = conn.execute("SELECT id FROM exchanges ORDER BY session_id, id "
                              "LIMIT 1 OFFSET 30").fetchone()[0]
        conn.execute("UPDATE exchanges SET content = 'altered' WHERE id = ?", (victim,))
    finally:
        conn.close()
    target = str(tmp_path / "copy.db")
    result = migrate(damaged, "--to", target, "--batch", "10")
    assert result.code == 2
    message = result.json()["error"]["message"]
    assert f"source turn #{victim}: its content does not match its content hash" in message
    stopped = progress(target, None)
    assert stopped is not None and stopped["copied"]["exchanges"] == 30  # pages before it
