"""Choosing the backend: STENO_DATABASE_URL's checks, a clear error for a database that
cannot be reached (its password never shown), and a store that opens the same way twice
(several processes start on one new database: each migration applies once)."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from stenographer.settings import Settings, SettingsError
from store.backend import open_store
from store.errors import StoreError
from store.postgres.db import redact_url
from tests.pg_server import PostgresServer


def test_the_url_must_name_postgresql(tmp_path: Path):
    with pytest.raises(SettingsError, match="postgresql://"):
        Settings.from_env({"STENO_DATABASE_URL": "mysql://u:p@h/db",
                           "OMEGA_STENOGRAPHER_DIR": str(tmp_path)})
    url_file = tmp_path / "url"
    url_file.write_text("postgresql://steno:s3cret@db.lan/steno\n")
    settings = Settings.from_env({"STENO_DATABASE_URL_FILE": str(url_file),
                                  "OMEGA_STENOGRAPHER_DIR": str(tmp_path)})
    assert settings.database_url == "postgresql://steno:s3cret@db.lan/steno"
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
        assert rows == [(1, "p001_initial")]
        assert {s.dialect for s in stores} == {"postgresql"}
    finally:
        for s in stores:
            s.close()
