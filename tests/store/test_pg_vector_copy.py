"""PostgreSQL's in-memory copy of the vectors, kept in the data directory
(store.postgres.vectors): a new server reads it instead of copying every row from the
database, and never when it is not this store's rows as they stand."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stenographer.app import App, open_app
from stenographer.settings import Settings
from store.postgres.kept import SEEN_FILE, forget_replaced_store
from store.postgres.vectors import KEPT_HEADER, PgVectorCache
from tests.pg_server import PostgresServer

WORDS = "ledger export timed out retry cache invoice tenant webhook snapshot quota".split()


def _turns(first: int, count: int) -> list[dict[str, str]]:
    return [{"role": "user", "session_id": f"s{i % 7}",
             "content": f"turn {i}: " + " ".join(WORDS[(i * k) % len(WORDS)] for k in (1, 3, 5))}
            for i in range(first, first + count)]


@pytest.fixture
def url(postgres_server: PostgresServer) -> str:
    return postgres_server.database()


@pytest.fixture
def copies(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times a copy was filled from the database (a COPY of every row)."""
    filled: list[int] = []
    real = PgVectorCache.everything

    def everything(self: PgVectorCache, conn: Any) -> Any:
        filled.append(1)
        return real(self, conn)

    monkeypatch.setattr(PgVectorCache, "everything", everything)
    return filled


def _open(tmp_path: Path, url: str) -> App:
    return open_app(Settings(data_dir=tmp_path, database_url=url))


@pytest.fixture
def first(tmp_path: Path, url: str) -> Iterator[App]:
    """A store of 300 turns whose copy was loaded, and kept, by this server."""
    app = _open(tmp_path, url)
    app.run("ingest_batch", {"turns": _turns(0, 300)})
    app.store.warm()
    app.store.vectors.wait()  # type: ignore[attr-defined]
    try:
        yield app
    finally:
        app.close()


def _kept(app: App) -> Path:
    (path,) = app.settings.data_dir.glob("vectors-*.bin")
    return path


def _same_copy(a: App, b: App) -> None:
    x, y = a.store.vectors, b.store.vectors
    assert x._n == y._n
    assert np.array_equal(x._ids[: x._n], y._ids[: y._n])
    assert np.array_equal(x._sessions[: x._n], y._sessions[: y._n])
    assert np.array_equal(x._cols[:, : x._n], y._cols[:, : y._n])


def _searched(app: App, query: str, session: str | None) -> list[Any]:
    args: dict[str, Any] = {"query": query, "mode": "semantic", "limit": 20}
    args.update({"session_id": session} if session else {"cross_session": True})
    out, _ = app.run("search", args)
    return [(h["exchange_id"], h["score"]) for h in out["reply"]["hits"]]


def test_a_new_server_reads_the_kept_copy(first: App, tmp_path: Path, url: str,
                                          copies: list[int]):
    assert json.loads(_kept(first).read_bytes()[:KEPT_HEADER])["rows"] == 300
    assert _kept(first).stat().st_mode & 0o777 == 0o600  # the turns' vectors: private
    second = _open(tmp_path, url)
    try:
        second.store.warm()
        assert copies == []  # read from the file, not the database
        _same_copy(first, second)
        for query, session in (("ledger export", None), ("retry cache", "s3"),
                               ("webhook quota", None)):
            assert _searched(second, query, session) == _searched(first, query, session)
        # what was written since comes from the database, as after any load
        out, _ = first.run("ingest", {"role": "user", "session_id": "s9",
                                      "content": "the zyzzyva snapshot export failed"})
        newest = out["reply"]["exchange_id"]
        assert newest in [i for i, _ in _searched(second, "zyzzyva snapshot", "s9")]
        assert copies == []
    finally:
        second.close()


def test_a_copy_that_is_not_the_stores_as_it_stands_is_not_read(
        first: App, tmp_path: Path, url: str, copies: list[int]):
    path = _kept(first)
    good = path.read_bytes()

    def reopened() -> App:
        app = _open(tmp_path, url)
        app.store.warm()
        app.store.vectors.wait()  # type: ignore[attr-defined]
        return app

    # the last row is not the database's (a database restored from another copy)
    path.write_bytes(good[:-1] + bytes([(good[-1] + 1) % 256]))
    second = reopened()
    _same_copy(first, second)
    second.close()
    assert copies == [1] and path.read_bytes() == good  # copied, and kept again
    # cut short (a write that never finished)
    path.write_bytes(good[:-100])
    second = reopened()
    _same_copy(first, second)
    second.close()
    assert copies == [1, 1]
    # a turn was forgotten since (by any process): the file still holds it
    gone = int(first.store.vectors._ids[5])
    first.run("forget", {"confirm": True, "exchange_ids": [gone]})
    second = reopened()
    try:
        assert copies == [1, 1, 1]
        assert second.store.vectors._n == 299
        assert gone not in second.store.vectors._ids[:299].tolist()
    finally:
        second.close()
    assert json.loads(path.read_bytes()[:KEPT_HEADER])["rows"] == 299


def test_the_copy_is_kept_again_once_a_tenth_more_has_come(first: App):
    first.run("ingest_batch", {"turns": _turns(300, 30)})
    _searched(first, "ledger export", None)  # 30 more rows: not yet
    first.store.vectors.wait()  # type: ignore[attr-defined]
    assert json.loads(_kept(first).read_bytes()[:KEPT_HEADER])["rows"] == 300
    first.run("ingest_batch", {"turns": _turns(330, 1)})
    _searched(first, "ledger export", None)
    first.store.vectors.wait()  # type: ignore[attr-defined]
    assert json.loads(_kept(first).read_bytes()[:KEPT_HEADER])["rows"] == 331


def test_a_file_a_killed_server_was_writing_is_removed_by_the_next_write(
        first: App, tmp_path: Path, url: str):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    path = _kept(first)
    left = path.with_name(f"{path.name}.{int(done.stdout)}.7")  # its process has ended
    writing = path.with_name(f"{path.name}.1.7")  # pid 1 runs: still being written
    left.write_bytes(b"x" * 1000)
    writing.write_bytes(b"x")
    path.unlink()
    second = _open(tmp_path, url)
    try:
        second.store.warm()  # no file: a COPY, then the file written again
        second.store.vectors.wait()  # type: ignore[attr-defined]
    finally:
        second.close()
    assert path.exists() and not left.exists() and writing.exists()


def test_the_files_of_a_store_its_database_no_longer_holds_are_removed(
        first: App, tmp_path: Path, url: str, postgres_server: PostgresServer):
    """A database dropped and made again under its name holds a new store: the next
    server removes the old store's kept files, and leaves other databases' alone."""
    import psycopg

    path = _kept(first)
    old_id = path.name.removeprefix("vectors-").removesuffix(".bin")
    index = tmp_path / f"keywords-{old_id}"  # as the derived index names its directory
    index.mkdir()
    (index / "meta.json").write_text("{}")
    half = path.with_name(f"{path.name}.1.7")  # a half-written copy of the old store
    half.write_bytes(b"x")
    other = tmp_path / f"vectors-{'b' * 32}.bin"  # another database's store
    other.write_bytes(b"x")
    seen = json.loads((tmp_path / SEEN_FILE).read_text())
    assert list(seen.values()) == [old_id]
    (location,) = seen
    seen.update({"127.0.0.1:1/other": "b" * 32})
    (tmp_path / SEEN_FILE).write_text(json.dumps(seen))
    first.close()

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(postgres_server.url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{name}"'.encode())
        admin.execute(f'CREATE DATABASE "{name}"'.encode())
    second = _open(tmp_path, url)
    try:
        second.run("ingest_batch", {"turns": _turns(0, 20)})
        assert _searched(second, "ledger export", None)
        second.store.warm()
        second.store.vectors.wait()  # type: ignore[attr-defined]
        (new_path,) = set(tmp_path.glob("vectors-*.bin")) - {other}
    finally:
        second.close()
    assert not path.exists() and not half.exists() and not index.exists()
    assert other.exists() and new_path != path
    seen = json.loads((tmp_path / SEEN_FILE).read_text())
    assert seen == {location: new_path.name.removeprefix("vectors-").removesuffix(".bin"),
                    "127.0.0.1:1/other": "b" * 32}


def test_a_recorded_id_of_another_form_names_no_file_to_remove(tmp_path: Path, url: str):
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"x")
    data = tmp_path / "data"  # made by the store (its first record of the database)
    app = _open(data, url)
    app.close()
    seen = json.loads((data / SEEN_FILE).read_text())
    (location,) = seen
    assert forget_replaced_store(data, location, "../outside") == []  # recorded, not removed
    assert forget_replaced_store(data, location, seen[location]) == []  # "../outside" before
    assert outside.exists()
    assert json.loads((data / SEEN_FILE).read_text()) == seen


_RECORDER = """
import sys, time
from pathlib import Path
from store.postgres.kept import forget_replaced_store
data, name, start = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
time.sleep(max(0.0, start - time.time()))
for i in range(int(sys.argv[4])):
    forget_replaced_store(data, f"127.0.0.1:5432/{name}-{i}", f"{i:032x}")
"""


def test_servers_starting_at_once_lose_no_record(tmp_path: Path):
    """Servers of several databases starting together on one data directory each add
    their database to the record: none is lost to another's write."""
    import subprocess
    import sys
    import time

    data = tmp_path / "data"
    names, each = [f"db{n}" for n in range(6)], 15
    start = time.time() + 1.5  # every process imported and waiting
    procs = [subprocess.Popen([sys.executable, "-c", _RECORDER, str(data), name, str(start),
                               str(each)]) for name in names]
    assert [p.wait(timeout=60) for p in procs] == [0] * len(names)
    seen = json.loads((data / SEEN_FILE).read_text())
    assert seen == {f"127.0.0.1:5432/{name}-{i}": f"{i:032x}"
                    for name in names for i in range(each)}
    assert sorted(p.name for p in data.iterdir()) == [SEEN_FILE, f"{SEEN_FILE}.lock"]


def test_a_server_that_cannot_have_the_lock_records_and_removes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """While another process holds the record's lock (past the wait), a server whose
    database holds another store leaves the record and the old store's files as they
    are: the next server records it."""
    import store.postgres.kept as kept
    from store.file_lock import open_lock, try_lock, unlock

    location, old, new = "127.0.0.1:5432/db", "a" * 32, "b" * 32
    assert forget_replaced_store(tmp_path, location, old) == []
    old_copy = tmp_path / f"vectors-{old}.bin"
    old_copy.write_bytes(b"x")
    monkeypatch.setattr(kept, "LOCK_WAIT_S", 0.2)
    lock = open_lock(tmp_path / f"{SEEN_FILE}.lock")
    try:
        assert try_lock(lock)  # held through another open file, as another process holds it
        assert forget_replaced_store(tmp_path, location, new) == []
        assert json.loads((tmp_path / SEEN_FILE).read_text()) == {location: old}
        assert old_copy.exists()
    finally:
        unlock(lock)
        lock.close()
    assert forget_replaced_store(tmp_path, location, new) == [old_copy]
    assert json.loads((tmp_path / SEEN_FILE).read_text()) == {location: new}
