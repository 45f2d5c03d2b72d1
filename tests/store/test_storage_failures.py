"""Storage conditions met by a real PostgreSQL server become the same user-facing
errors as on SQLite (``store.errors.storage_failure``): what happened, what it means for
the call, what to do. A read-only transaction or database and a lock wait that ran out
(the server's own conditions, SQLSTATE 25006 and 55P03); a call that had stored its turn
before its compression met one says that it was done only in part. The SQLite conditions: a full
and a read-only file system in tests/e2e/test_storage_failures.py, a damaged file in
tests/cli/test_commands.py."""

from __future__ import annotations

import threading
from pathlib import Path

import psycopg
import pytest

from stenographer.app import open_app
from stenographer.settings import DEFAULT_TURN_LIMIT, Settings
from store.backend import open_store
from store.errors import StoreBusy, StoreReadOnly
from store.postgres.db import redact_url
from tests.cli.conftest import run_cli
from tests.pg_server import PostgresServer


def test_postgresql_conditions_become_the_same_errors(postgres_server: PostgresServer,
                                                       tmp_path: Path):
    url = postgres_server.database()
    store = open_store(tmp_path / "steno.db", database_url=url)
    try:
        with pytest.raises(StoreReadOnly) as caught, store.write() as conn:
            conn.execute("SET TRANSACTION READ ONLY")
            conn.execute("INSERT INTO meta(key, value) VALUES ('probe', 'x')")
        assert str(caught.value).startswith(
            f"the database {redact_url(url)} is read-only (a standby server, or "
            "default_transaction_read_only is on): nothing was stored or changed; reads "
            "keep working."), caught.value

        locked, release = threading.Event(), threading.Event()

        def hold_the_row() -> None:
            with psycopg.connect(url) as other, other.transaction():
                other.execute("SELECT value FROM meta WHERE key = 'vector_dim' FOR UPDATE")
                locked.set()
                release.wait(30)

        holder = threading.Thread(target=hold_the_row)
        holder.start()
        try:
            assert locked.wait(30)
            with pytest.raises(StoreBusy) as busy, store.write() as conn:
                conn.execute("SET LOCAL lock_timeout = '50ms'")
                conn.execute("UPDATE meta SET value = value WHERE key = 'vector_dim'")
        finally:
            release.set()
            holder.join(30)
        assert f"the database {redact_url(url)} stayed locked by another process" \
            in str(busy.value) and "nothing was stored or changed" in str(busy.value)
        with store.read() as conn:  # the store is still usable
            assert conn.execute("SELECT count(*) FROM meta WHERE key = 'probe'"
                                ).fetchone() == (0,)
    finally:
        store.close()


def test_a_read_only_postgresql_database_is_refused_at_open_saying_so(
        postgres_server: PostgresServer, tmp_path: Path):
    url = postgres_server.database()
    open_store(tmp_path / "steno.db", database_url=url).close()
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(postgres_server.url, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on'
                      .encode())
    done = run_cli(tmp_path / "data", "status", STENO_DATABASE_URL=url)
    assert done.code == 2, done.err
    assert (f"the database {redact_url(url)} is read-only (a standby server, or "
            "default_transaction_read_only is on): the store could not be opened"
            in done.err), done.err


def test_a_failure_after_the_turn_was_stored_says_the_call_was_done_in_part(
        postgres_server: PostgresServer, tmp_path: Path):
    url = postgres_server.database()
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(postgres_server.url, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{name}" SET lock_timeout = \'200ms\''.encode())
    app = open_app(Settings(data_dir=tmp_path, database_url=url, shared_dir=None))
    try:
        def ingest(i: int) -> dict[str, object]:
            out, _ = app.run("ingest", {"role": "user", "session_id": "s",
                                        "content": f"step {i} of the release"})
            reply: dict[str, object] = out["reply"]
            return reply

        first = ingest(0)["exchange_id"]
        for i in range(1, DEFAULT_TURN_LIMIT - 1):
            ingest(i)
        with psycopg.connect(url) as other, other.transaction():
            # Compression claims the session's oldest turns; one of them stays locked.
            other.execute("SELECT id FROM exchanges WHERE id = %s FOR UPDATE", (first,))
            with pytest.raises(StoreBusy) as caught:
                ingest(DEFAULT_TURN_LIMIT - 1)
        assert (f"the database {redact_url(url)} stayed locked by another process longer "
                "than the server's lock_timeout: the call was done only in part: what it "
                "stored before this step stays (e.g. the turn), the rest was not stored."
                ) in str(caught.value)
        with psycopg.connect(url) as check:
            assert check.execute("SELECT count(*), count(brief_id) FROM exchanges"
                                 ).fetchone() == (DEFAULT_TURN_LIMIT, 0)
        assert ingest(DEFAULT_TURN_LIMIT)["compressed"]  # the next turn compresses them
    finally:
        app.close()
