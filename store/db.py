"""The SQLite store: one file, WAL mode, one connection per thread.

Writers in this process take a lock before ``BEGIN IMMEDIATE`` so they queue in
memory instead of sleeping in SQLite's busy handler; writers in other processes are
serialised by SQLite itself (busy timeout). Readers never block writers (WAL).
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import apsw
import apsw.bestpractice

from store.errors import StoreError
from store.migrations import migrate
from store.rewrite import FileRewrite
from store.runs import TraceBuffer

if TYPE_CHECKING:
    from store.vectors import VectorCache

__all__ = ["BUSY_TIMEOUT_MS", "Store", "vec0_path"]

BUSY_TIMEOUT_MS = 10_000

# Pages are read through a memory map of the file (up to this many bytes) instead of a
# read call and a copy into the connection's 2 MB page cache each. A search or guard
# call at 20,000 turns misses that cache ~200 times (the keyword index alone), and any
# write by another connection (the trace writer, other processes) empties it in WAL
# mode. Measured in process, alternated per call on one store: 0.2-0.4 ms less CPU per
# compact_guard and query_history call (3-5%); get_brief (mostly cache hits) ~0.05 ms
# more, ingest unchanged.
MMAP_BYTES = 1 << 30

# apsw best practice: no double-quoted string literals, journal-mode defaults, and so on.
apsw.bestpractice.apply(
    (apsw.bestpractice.connection_dqs, apsw.bestpractice.connection_recursive_triggers)
)


def vec0_path() -> str:
    """sqlite-vec's loadable extension: ``vec0`` in its package directory, found without
    importing the package, whose ``__init__`` imports numpy and sqlite3 for helpers the
    store does not use (~0.1 s of CPU that a hook's process cannot spare). Another
    layout: the package's own ``loadable_path()``."""
    spec = importlib.util.find_spec("sqlite_vec")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        if any(name.startswith("vec0.") for name in os.listdir(folder)):
            return os.path.join(folder, "vec0")
    import sqlite_vec

    return str(sqlite_vec.loadable_path())


class Store:
    """A store file and the connections that serve it. Thread-safe."""

    dialect = "sqlite"

    def __init__(
        self, path: Path | str, *, synchronous: str = "normal", vector_dim: int = 256,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
    ) -> None:
        self.path = Path(path)
        self.busy_timeout_ms = busy_timeout_ms
        self.location = str(self.path)
        self.data_dir = self.path.parent
        self._vector_dim = vector_dim
        self._vectors: VectorCache | None = None
        self.traces = TraceBuffer(self.write)
        self.file_rewrite = FileRewrite(self)
        self.synchronous = synchronous
        self._local = threading.local()
        self._write_lock = threading.Lock()
        self._all: list[apsw.Connection] = []
        self._all_lock = threading.Lock()
        self._closed = False
        self._create_file()
        migrate(self.connection())

    @property
    def vectors(self) -> VectorCache:
        """The in-memory copy of the hashed vectors, made on first use: a process that
        never ranks by vector (a hook's briefing) never imports numpy (~0.1 s of CPU)."""
        if self._vectors is None:
            from store.vectors import VectorCache

            with self._all_lock:
                if self._vectors is None:
                    self._vectors = VectorCache(self._vector_dim)
        return self._vectors

    def _create_file(self) -> None:
        """Owner-only directory and file, created before SQLite opens it."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not self.path.exists():
            fd = os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600)
            os.close(fd)

    def _open(self) -> apsw.Connection:
        try:
            conn = apsw.Connection(str(self.path))
        except apsw.Error as ex:
            raise StoreError(f"cannot open the store {self.path}: {ex}") from ex
        conn.set_busy_timeout(self.busy_timeout_ms)
        conn.enable_load_extension(True)
        conn.load_extension(vec0_path())
        conn.enable_load_extension(False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={'FULL' if self.synchronous == 'full' else 'NORMAL'}")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA temp_store=MEMORY")
        conn.execute("PRAGMA secure_delete=FAST")  # forgotten text does not linger in pages
        conn.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
        return conn

    def connection(self) -> apsw.Connection:
        """This thread's connection (opened on first use)."""
        conn: apsw.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise StoreError("the store is closed")
            conn = self._open()
            self._local.conn = conn
            with self._all_lock:
                self._all.append(conn)
        return conn

    @contextmanager
    def write(self) -> Iterator[apsw.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``): committed on success, else rolled
        back, also when the COMMIT itself fails (a deferred constraint, a full disk):
        SQLite then leaves the transaction open, and every later write of this
        thread would fail to begin."""
        conn = self.connection()
        with self._write_lock:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if not conn.get_autocommit():
                    conn.execute("ROLLBACK")
                raise

    @contextmanager
    def exclusive(self) -> Iterator[apsw.Connection]:
        """This thread's connection with the process's write lock held and no
        transaction open: for statements that cannot run in one (VACUUM, checkpoints)."""
        conn = self.connection()
        with self._write_lock:
            yield conn

    @contextmanager
    def scrubbing(self) -> Iterator[None]:
        """This thread's writes zero every byte they free, not only the cheap ones."""
        conn = self.connection()
        conn.execute("PRAGMA secure_delete=ON")
        try:
            yield
        finally:
            conn.execute("PRAGMA secure_delete=FAST")

    @contextmanager
    def read(self) -> Iterator[apsw.Connection]:
        """A consistent snapshot for several reads."""
        conn = self.connection()
        if not conn.get_autocommit():  # nested inside a write on this thread
            yield conn
            return
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")

    def close(self) -> None:
        self.file_rewrite.close()
        self.traces.close()
        self._closed = True
        with self._all_lock:
            conns, self._all = self._all, []
        for conn in conns:
            conn.close()
