"""Choosing the backend: STENO_DATABASE_URL's checks, a clear error for a database that
cannot be reached (its password never shown), and a store that opens the same way twice
(several processes start on one new database: each migration applies once), and
PostgreSQL's document-frequency cache and its sampled counts; either backend's warm-up."""

from __future__ import annotations

import math
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from stenographer.app import open_app
from stenographer.settings import Settings, SettingsError
from store.backend import open_store
from store.errors import StoreError
from store.migrations import PENDING_LIST_KB
from store.postgres.db import redact_url
from store.sql import all_rows, one
from tests.pg_server import PostgresServer


def test_the_url_must_name_postgresql(tmp_path: Path):
    with pytest.raises(SettingsError, match="postgresql://"):
        Settings.from_env({"STENO_DATABASE_URL": "mysql://u:p@h/db",
                           "OMEGA_STENOGRAPHER_DIR": str(tmp_path)})
    url_file = tmp_path / "url"
    url_file.write_text("postgresql://steno:s3cret@db.lan/steno\n")
    settings = Settings.from_env({"STENO_DATABASE_URL_FILE": str(url_file),
                                  "OMEGA_STENOGRAPHER_DIR": str(tmp_path)})
    assert settings.database_url is not None
    assert settings.database_url.get_secret_value() == "postgresql://steno:s3cret@db.lan/steno"
    assert "s3cret" not in repr(settings)
    assert Settings.from_env({"OMEGA_STENOGRAPHER_DIR": str(tmp_path)}).database_url is None


def test_an_unreachable_database_is_a_clear_error_without_the_password(tmp_path: Path):
    with socket.socket() as s:  # a port where nothing listens
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql://steno:s3cret@127.0.0.1:{port}/steno"
    started = time.monotonic()
    with pytest.raises(StoreError) as raised:
        open_store(tmp_path / "steno.db", database_url=url)
    assert time.monotonic() - started < 30
    assert "s3cret" not in str(raised.value)
    assert f"127.0.0.1:{port}/steno" in str(raised.value)
    assert redact_url(url) == f"postgresql://steno:***@127.0.0.1:{port}/steno"


def test_processes_opening_one_new_database_migrate_it_once(
        tmp_path: Path, postgres_server: PostgresServer):
    url = postgres_server.database()
    errors: list[BaseException] = []
    stores = []

    def open_one() -> None:
        try:
            stores.append(open_store(tmp_path / "steno.db", database_url=url))
        except BaseException as ex:  # reported below
            errors.append(ex)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert errors == []
        with stores[0].read() as conn:
            rows = list(conn.execute("SELECT version, name FROM schema_migrations"))
        assert rows == [(1, "p001_initial"), (2, "p002_traces_without_text"),
                        (3, "p003_session_cwd"), (4, "p004_scale_tuning"),
                        (5, "p005_short_pending_list")]
        assert {s.dialect for s in stores} == {"postgresql"}
    finally:
        for s in stores:
            s.close()


def test_common_words_are_counted_once_while_the_store_grows_by_less_than_the_drift(
        tmp_path: Path, postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch):
    """PostgreSQL's IDF: a phrase held by many turns is counted once and its share of
    the turns reused until the store grows past DF_DRIFT; rare ones are always counted."""
    import store.postgres.search as pg_search

    monkeypatch.setattr(pg_search, "DF_CACHE_MIN", 6)
    monkeypatch.setattr(pg_search, "_shares", type(pg_search._shares)())
    app = open_app(Settings(data_dir=tmp_path, database_url=postgres_server.database()))
    counted: list[list[str]] = []
    real = pg_search.all_rows

    def spy(conn: Any, sql: str, params: Any = ()) -> Any:
        if sql == pg_search.HOLDING:
            counted.append(list(params[0]))
        return real(conn, sql, params)

    monkeypatch.setattr(pg_search, "all_rows", spy)
    try:
        for i in range(40):
            text = (f"deploy step {i}" + (" kafka" if i % 8 == 1 else "")
                    + (" zebra" if i == 7 else ""))
            app.run("ingest", {"role": "user", "content": text, "session_id": "s"})
        units = ["'deploy'", "'kafka'", "'zebra'"]
        with app.store.read() as conn:
            exact = pg_search.phrase_idfs(conn, units)
            again = pg_search.phrase_idfs(conn, units)
        with app.store.read() as conn:
            held = [pg_search.one(conn, "SELECT count(*) FROM exchanges_fts WHERE doc @@ "
                                  "to_tsquery('english', ?)", (u,))[0] for u in units]
        assert held[0] == 40 and 6 <= held[1] < 20 and held[2] < 6
        assert counted == [units, ["'zebra'"]]  # deploy and kafka were kept
        assert again == pytest.approx(exact, rel=1e-12)
        assert exact[0] == pytest.approx(1e-6) and exact[2] > exact[1] > exact[0]
        app.run("ingest", {"role": "user", "content": "kafka deploy", "session_id": "s"})
        with app.store.read() as conn:  # 41 turns: within 5% of 40, shares reused
            pg_search.phrase_idfs(conn, units)
        assert counted[-1] == ["'zebra'"]
        for i in range(3):
            app.run("ingest", {"role": "user", "content": f"kafka {i}", "session_id": "s"})
        with app.store.read() as conn:  # 44 turns: 10% more, counted again
            grown = pg_search.phrase_idfs(conn, units)
        assert counted[-1] == units
        with app.store.read() as conn:  # turns holding kafka (their own or as context)
            n = pg_search.one(conn, "SELECT count(*) FROM exchanges_fts WHERE doc @@ "
                              "to_tsquery('english', 'kafka')")[0]
        assert grown[1] == pytest.approx(math.log((44 - n + 0.5) / (n + 0.5)), rel=1e-12)
        hits = app.run("search", {"query": "zebra kafka", "session_id": "s"})[0]["hits"]
        assert hits and "zebra" in hits[0]["snippet"]
    finally:
        app.close()


def test_a_phrase_held_by_more_turns_than_the_bound_is_counted_in_a_sample(
        tmp_path: Path, postgres_server: Any, monkeypatch: pytest.MonkeyPatch):
    """A prefix held by more than COUNT_BOUND turns: its share of a sample of the table
    stands for its count (no count to the end), and the IDF stays close to the exact."""
    import store.postgres.search as pg_search

    monkeypatch.setattr(pg_search, "COUNT_BOUND", 10)
    monkeypatch.setattr(pg_search, "_shares", type(pg_search._shares)())
    app = open_app(Settings(data_dir=tmp_path, database_url=postgres_server.database()))
    sampled: list[Any] = []
    real = pg_search.all_rows

    def spy(conn: Any, sql: str, params: Any = ()) -> Any:
        rows = real(conn, sql, params)
        if sql == pg_search.SAMPLED:
            sampled.append((params, rows))
        return rows

    monkeypatch.setattr(pg_search, "all_rows", spy)
    try:
        turns = [{"session_id": f"s{i % 3}", "role": "user",
                  "content": ("migration step" if i % 3 else "deploy step") + f" {i}"}
                 for i in range(90)]
        app.run("ingest_batch", {"turns": turns})
        units = ["('migrat':*)", "('deploy')"]
        with app.store.read() as conn:
            idfs = pg_search.phrase_idfs(conn, units)
            held = pg_search.one(conn, "SELECT count(*) FROM exchanges_fts WHERE doc @@ "
                                 "to_tsquery('english', ?)", (units[0],))[0]
        ((params, rows),) = sampled
        assert params[1] == units  # both held by more than 10 of the 90 turns
        assert all(seen == 90 for _, _, seen in rows)  # a small table: all of it
        assert held == 60
        assert idfs[0] == pytest.approx(max(math.log((90 - 60 + 0.5) / 60.5), 1e-6))
        assert idfs[1] == pytest.approx(math.log((90 - 30 + 0.5) / 30.5))
    finally:
        app.close()


def test_warm_loads_the_vector_copy_a_first_search_would_load(
        tmp_path: Path, database_url: str | None):
    """Either backend: ``warm`` fills the in-memory copy of the vectors from the store,
    and a search after it finds nothing more to read."""
    app = open_app(Settings(data_dir=tmp_path, database_url=database_url))
    try:
        app.run("ingest_batch", {"turns": [
            {"role": "user", "content": f"turn {i}: the ledger export timed out",
             "session_id": f"s{i % 3}"} for i in range(30)]})
        assert app.store.vectors._n == 0  # nothing searched yet
        app.store.warm()
        assert app.store.vectors._n == 30
        loaded = app.store.vectors._ids[:30].tolist()
        out, _ = app.run("search", {"query": "ledger export", "cross_session": True})
        assert out["reply"]["hits"]
        assert app.store.vectors._ids[:30].tolist() == loaded and app.store.vectors._n == 30
    finally:
        app.close()


def test_a_bulk_write_analyzes_a_store_that_has_outgrown_its_statistics(
        tmp_path: Path, postgres_server: Any):
    """PostgreSQL: a batch that leaves more turns than twice the rows the planner's
    statistics were taken of (plus the server's base threshold, 50) analyzes every table
    of the schema; a batch within that leaves them as they are (to autovacuum, switched
    off here so that only the writes analyze)."""
    app = open_app(Settings(data_dir=tmp_path, database_url=postgres_server.database()))

    def rows_seen() -> dict[str, float]:
        with app.store.read() as conn:
            return dict(all_rows(conn, "SELECT c.relname, c.reltuples FROM pg_class c "
                                 "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE "
                                 "n.nspname = current_schema() AND c.relname IN "
                                 "('exchanges', 'exchanges_fts', 'exchange_vectors')"))

    def batch(first: int, count: int) -> None:
        app.run("ingest_batch", {"turns": [
            {"role": "user", "content": f"turn {i}: the ledger export timed out",
             "session_id": f"s{i % 3}"} for i in range(first, first + count)]})

    try:
        with app.store.write() as conn:
            for (table,) in all_rows(conn, "SELECT tablename FROM pg_tables "
                                     "WHERE schemaname = current_schema()"):
                conn.execute(f'ALTER TABLE "{table}" SET (autovacuum_enabled = false)')
        never = rows_seen()
        assert all(seen <= 0 for seen in never.values())  # never analyzed
        batch(0, 10)  # 10 turns: not past 2 x 0 + 50
        assert rows_seen() == never
        batch(10, 60)  # 70 turns: past 50
        assert rows_seen() == {"exchanges": 70, "exchanges_fts": 70, "exchange_vectors": 70}
        batch(70, 120)  # 190 turns: not past 2 x 70 + 50
        assert rows_seen()["exchanges"] == 70
        batch(190, 1)  # 191 turns: past it
        assert rows_seen() == {"exchanges": 191, "exchanges_fts": 191,
                               "exchange_vectors": 191}
    finally:
        app.close()


def test_the_keyword_indexs_pending_list_is_kept_short(tmp_path: Path, postgres_server: Any):
    """PostgreSQL: every search reads the GIN index's pending list whole, so a store's
    list is held to PENDING_LIST_KB, on a new store and on one made before."""
    url = postgres_server.database()
    options = ("SELECT reloptions FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
               "WHERE n.nspname = current_schema() AND c.relname = 'exchanges_fts_doc'")

    def reopened() -> list[str] | None:
        store = open_store(tmp_path / "steno.db", database_url=url)
        try:
            with store.read() as conn:
                return one(conn, options)[0]
        finally:
            store.close()

    assert reopened() == [f"gin_pending_list_limit={PENDING_LIST_KB}"]
    store = open_store(tmp_path / "steno.db", database_url=url)
    try:  # as a store of the version before was left
        with store.write() as conn:
            conn.execute("ALTER INDEX exchanges_fts_doc RESET (gin_pending_list_limit)")
            conn.execute("DELETE FROM schema_migrations WHERE name = 'p005_short_pending_list'")
    finally:
        store.close()
    assert reopened() == [f"gin_pending_list_limit={PENDING_LIST_KB}"]


def test_a_vector_blob_in_pgvector_text_and_back_is_the_same():
    """Every int8 value: the text a PostgreSQL store writes, and the blob it reads."""
    import numpy as np

    from store.postgres.vectors import int8_blob, vector_text

    blob = bytes(range(256))
    text = vector_text(blob)
    assert text == "[" + ",".join(str(v) for v in np.frombuffer(blob, np.int8)) + "]"
    assert text.startswith("[0,1,") and ",127,-128,-127," in text and text.endswith(",-1]")
    assert int8_blob(text) == blob
