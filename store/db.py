"""The SQLite store: one file, WAL mode, one connection per thread.

Writers in this process take a lock before ``BEGIN IMMEDIATE`` so they queue in
memory instead of sleeping in SQLite's busy handler; writers in other processes are
serialised by SQLite itself (busy timeout). Readers never block writers (WAL). The
log is copied back into the file on a thread of its own once a commit leaves it long
(``CHECKPOINT_PAGES``), not inside that commit.

A file that cannot be written (a read-only file system or file) is opened read-only:
every read works, ``write()`` and ``exclusive()`` refuse with ``StoreReadOnly``, and
nothing is written at open (no migration, no journal mode change, no stage traces).
A failing driver call (full disk, I/O error, damage, a lock held beyond the wait) leaves
the store as the ``StoreError`` of its condition (``store.errors.storage_failure``).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import apsw

from store.errors import (
    Doing,
    StoreError,
    StoreReadOnly,
    Where,
    failure,
    read_only_reason,
    storage_failure,
)
from store.rewrite import FileRewrite
from store.runs import TraceBuffer
from store.schema_version import SCHEMA_VERSION, pending_migrations
from store.sqlite import bm25_top_path
from store.upkeep import Upkeep

if TYPE_CHECKING:
    from store.keyword_index import KeywordIndex
    from store.sql import Conn
    from store.sqlite.doc_freq import CommonWords
    from store.vectors import VectorCache

__all__ = ["BUSY_TIMEOUT_MS", "Store", "vec0_path"]

BUSY_TIMEOUT_MS = 10_000

# Pages are read through a memory map of the file (up to this many bytes) instead of a
# read call and a copy into the connection's 2 MB page cache each. A search or guard
# call at 20,000 turns misses that cache ~200 times (the keyword index alone), and any
# write by another connection (the trace writer, other processes) empties it in WAL
# mode. Measured in process, alternated per call on one store: 0.2-0.4 ms less CPU per
# compact_guard and query_history call (3-5%); get_brief (mostly cache hits) ~0.05 ms
# more, ingest unchanged. The upkeep's and the checkpoints' threads read without it: a
# page read through the map stays resident in the process, and FTS5's merge of every
# segment reads the whole keyword index (~270 MB of a 1,000,000-turn store, which left
# the server's resident memory at 0.94-0.96 GB instead of 0.68; bench/scale.py).
MMAP_BYTES = 1 << 30
# Prepared statements a connection keeps (apsw's cache, 100 by default): one serving
# connection runs the ingest's, the compression's, the searches' and the upkeep's
# statements, and with 100 the compression's (every eighth turn of a session) were
# prepared again each time.
STATEMENT_CACHE = 256
# Pages in the write-ahead log from which it is copied back into the file (SQLite's
# default). A checkpoint is the one fsync of a commit in NORMAL mode: it runs on a
# thread of its own (``Store._checkpoint``), not inside the commit that crossed it.
CHECKPOINT_PAGES = 1000
# The thread's checkpoint lets the log restart only if it ends between two writes; writes
# back to back (a bulk import) leave it no gap, and from this many pages the commit
# waits for the thread and checkpoints itself, as SQLite would have at CHECKPOINT_PAGES.
CHECKPOINT_LIMIT = 4 * CHECKPOINT_PAGES


def _best_practice(connection: apsw.Connection) -> None:
    """apsw's best practice for every connection: no double-quoted string literals
    (``apsw.bestpractice.connection_dqs``, set here without importing ``apsw.ext``, ~10
    ms of a server's start-up).

    Recursive triggers (apsw's ``connection_recursive_triggers``) stay off, SQLite's
    default. The store's one trigger raises the keyword epoch when FTS5 removes a row's
    size (``store.sqlite.schema.keyword_epoch``); FTS5 writes every row's size with
    ``INSERT OR REPLACE``, and with recursive triggers on, a table with a delete trigger
    makes each such REPLACE take SQLite's path that fires the trigger for the row it
    replaces: about 28 us more a turn on a bulk import (40,000 turns: 4.7 -> 5.9 s of
    CPU). FTS5 removes a row with a DELETE, which fires the trigger either way; it
    replaces a size only for a rowid inserted again without a removal first, which no
    path of the store does (and its row count would then grow without a row above the
    largest rowid, which ``store.sqlite.doc_freq`` notices)."""
    connection.config(apsw.SQLITE_DBCONFIG_DQS_DML, 0)
    connection.config(apsw.SQLITE_DBCONFIG_DQS_DDL, 0)


apsw.connection_hooks.append(_best_practice)


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
        self.file: Path | None = self.path
        self.busy_timeout_ms = busy_timeout_ms
        self.location = str(self.path)
        self.data_dir = self.path.parent
        self.where = Where(f"the store {self.path}", self.data_dir, busy_timeout_ms / 1000)
        self._vector_dim = vector_dim
        self._vectors: VectorCache | None = None
        self._keywords: KeywordIndex | None = None
        self._merge_due = 0  # turns from which FTS5's segments may be due for a merge
        self._small_due = 0  # turns from which its small segments are (merge_small)
        self.upkeep = Upkeep()  # FTS5's merge, the derived keyword index's flush and build
        self.checkpoints = Upkeep()  # the log copied back into the file
        self._keeps_keywords = False  # seen keeping the derived keyword index
        self._common: CommonWords | None = None  # the index's common words, in a server
        self.synchronous = synchronous
        self._local = threading.local()
        self._write_lock = threading.Lock()
        self._all: list[tuple[threading.Thread, apsw.Connection]] = []  # by thread
        self._all_lock = threading.Lock()
        self._closed = False
        self._create_file()
        self.read_only, self._uri, self._flags = self._target()
        try:
            conn = self.connection()
            with self._failures("open"):
                pending = pending_migrations(conn)
                if pending and not self.read_only:
                    # The migration list is built only for a file that needs it: a
                    # current store is opened with one read of the migrations table.
                    from store.migrations import migrate

                    migrate(conn)
                elif pending:
                    raise StoreReadOnly(
                        f"{self.where.store} needs {pending} schema migration(s) to reach "
                        f"version {SCHEMA_VERSION}, but it is read-only "
                        f"({read_only_reason(self.data_dir)}): run any `stenographer` "
                        "command once where it is writable, then open it here again.",
                        self.where, "open", "")
        except BaseException:
            self._close_connections()
            raise
        # A read-only store has no file to keep its runs' traces in: they are dropped.
        # Trace writes are bookkeeping: they do not count as the calls' commits.
        self.traces = TraceBuffer(None if self.read_only
                                  else functools.partial(self._write, counted=False))
        self.file_rewrite = FileRewrite(self)

    @property
    def keywords(self) -> KeywordIndex:
        """The derived keyword index beside the file (``store.keyword_index``), opened on
        first use: Tantivy is imported by the processes that search only."""
        if self._keywords is None:
            from store.keyword_index import KeywordIndex, index_directory

            with self._all_lock:
                if self._keywords is None:
                    self._keywords = KeywordIndex(index_directory(self.path), self.upkeep)
        return self._keywords

    def audited_keywords(self) -> KeywordIndex | None:
        """The derived keyword index, for the contract audit (``keyword_index``); None
        while the store is smaller than ``KeywordIndex.answers_from`` and keeps none:
        nothing is expected of it there."""
        if not self.read_only and not self.expects_keywords():
            return None
        return self.keyword_index()

    def opened_keywords(self) -> KeywordIndex | None:
        """The derived keyword index if this process has opened it (it searches), else
        None; opens nothing."""
        return self._keywords

    def opened_vectors(self) -> VectorCache | None:
        """The in-memory copy of the hashed vectors if this process has made it (it
        ranks by vector), else None; makes nothing (numpy stays unimported)."""
        return self._vectors

    def keeps_keywords(self) -> bool:
        """Whether the store keeps the derived keyword index
        (``store.keyword_index.keeps_index``): read until it does, then known without a
        read (a store never stops keeping it), so a write past the index's size does
        not read it again."""
        if not self._keeps_keywords:
            from store.keyword_index import keeps_index

            with self.read() as conn:
                self._keeps_keywords = keeps_index(conn)
        return self._keeps_keywords

    def expects_keywords(self) -> bool:
        """Whether the derived keyword index should hold the store's turns: the store
        keeps it, or has reached ``KeywordIndex.answers_from`` turns (its first build is
        due)."""
        if self.keeps_keywords():
            return True
        from store.keyword_index import KeywordIndex, search_state

        with self.read() as conn:
            largest, _ = search_state(conn)
        return largest >= KeywordIndex.answers_from

    def keyword_index(self) -> KeywordIndex | None:
        """The derived keyword index (``keywords``); None for a read-only file, or when
        it cannot be opened (every search is FTS5's then)."""
        if self.read_only:
            return None
        try:
            return self.keywords
        except (StoreError, OSError, ValueError) as ex:  # tantivy reports I/O as ValueError
            print(f"stenographer: the keyword index could not be opened: {ex}",
                  file=sys.stderr)
            return None

    def keywords_need_rebuild(self) -> bool:
        from store.keyword_index import needs_rebuild

        return needs_rebuild(self)

    def searched_keywords(self, conn: Conn) -> KeywordIndex | None:
        """The derived keyword index when it should answer a search in ``conn``'s
        snapshot, else None (FTS5 answers, with the same hits). Below
        ``KeywordIndex.answers_from`` turns (bounded by the largest turn id) FTS5
        answers: the index is built only once the store reaches that size (nothing is
        queued until then; ``nodes.publish.keyword_index.build_when_due``), and FTS5's
        segments are merged, and a server's common words read, on the store's upkeep
        thread when they are due (``_keep_fts5``: Tantivy is neither imported nor
        opened). From that size, past ``HOT_LIMIT`` queued turns the queue is moved into
        the index on that thread, and past ``BULK_QUEUE`` FTS5 answers until it is in: no
        search waits for the index.
        FTS5's segments are merged there too when the queue is short (a session's plain
        searches are FTS5's: ``KeywordIndex.counted_hits``)."""
        from store.keyword_index import BULK_QUEUE, HOT_LIMIT, KeywordIndex, search_state
        from store.sqlite.search import MERGE_FROM

        if self.read_only:
            return None
        largest, queued = search_state(conn)
        merge_due = largest >= max(min(self._merge_due, self._small_due), MERGE_FROM)
        if largest < KeywordIndex.answers_from:
            if merge_due or self._words_due(largest):
                self.upkeep.start(self._keep_fts5, "fts5-upkeep")
            return None
        derived = self.keyword_index()  # opened once per process (Tantivy imported then)
        if derived is None:
            return None
        if queued > HOT_LIMIT:
            derived.flush_later(self)
        elif merge_due:
            self.upkeep.start(self._keep_fts5, "fts5-upkeep")
        return None if queued > BULK_QUEUE else derived

    def _words_due(self, largest: int) -> bool:
        """Whether this process keeps the FTS5 index's common words (``serves``) and they
        are to be read: none yet, found of rows a search's snapshot does not hold, or
        far behind ``largest`` (``store.sqlite.doc_freq.CommonWords.due``). Not below
        ``MERGE_FROM`` turns, where counting a word over the whole index costs little,
        nor from ``KeywordIndex.answers_from``, where the derived index counts them."""
        common = self._common
        if common is None:
            return False
        from store.keyword_index import KeywordIndex
        from store.sqlite.search import MERGE_FROM

        return MERGE_FROM <= largest < KeywordIndex.answers_from and common.due(largest)

    def _keep_fts5(self) -> None:
        """FTS5's merge (``store.sqlite.search.keep_merged``) when due, else that of its
        small segments (``merge_small``), then the index's common words when due
        (``_words_due``), on the upkeep thread; the searches start no other merge before
        the store has grown to the next due size of either. It stops between two steps
        when the store closes or the derived index's queue grows past ``HOT_LIMIT`` (its
        flush needs the thread; the next search goes on with the merge where it
        stopped)."""
        from store.keyword_index import HOT_LIMIT, KeywordIndex, search_state
        from store.sqlite.doc_freq import read_words
        from store.sqlite.search import keep_merged, merge_small, merge_state

        def stop() -> bool:
            if self.upkeep.stopping():
                return True
            with self.read() as conn:
                largest, queued = search_state(conn)
            return queued > HOT_LIMIT and largest >= KeywordIndex.answers_from

        try:
            if not keep_merged(self, stop):
                merge_small(self, stop)
            largest, self._merge_due, self._small_due = merge_state(self)
            if self._words_due(largest) and not stop():
                assert self._common is not None
                with self.read() as conn:
                    self._common.take(read_words(conn))
        except Exception as ex:  # left as it is: a later search tries again
            print(f"stenographer: the FTS5 index was not merged or its words not "
                  f"counted: {ex}", file=sys.stderr)

    def after_bulk_write(self) -> int:
        """After a bulk write: a queue longer than ``BULK_QUEUE`` (which searches would
        leave to FTS5 until a thread had moved it in) is moved into the derived index
        now, by the writer that made it, so the store is whole when the write returns
        and the queue's rows are freed for the next batch. A shorter queue is left to
        the searches (nothing is opened: a hook's pass of a few turns stays cheap), and
        so is a queue of a store smaller than ``KeywordIndex.answers_from`` (one that
        kept its index from before: FTS5 answers its searches). The first build, when
        a write brings the store to that size, is the caller's
        (``nodes.publish.keyword_index.build_when_due``)."""
        from store.keyword_index import BULK_QUEUE, KeywordIndex, search_state

        if self.read_only:
            return 0
        with self.read() as conn:
            largest, queued = search_state(conn)
        if queued <= BULK_QUEUE or largest < KeywordIndex.answers_from:
            return 0
        derived = self.keyword_index()
        return 0 if derived is None else derived.flush(self)

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

    def warm(self) -> None:
        """Do now what a first search would do before its own work: load the in-memory
        copy of the vectors, and what ``searched_keywords`` does (open the derived
        keyword index of a store large enough to keep one; start the upkeep thread on
        FTS5's segments or the index's queue when they are due). Call outside a
        transaction (a server does, once it is idle after opening)."""
        with self.read() as conn:
            self.vectors.refresh(conn)
            self.searched_keywords(conn)

    def serves(self) -> None:
        """From now on this process keeps the FTS5 index's common words for its searches
        (``store.sqlite.doc_freq.Words``): every connection, open or opened later, takes
        a word's count from them, and the upkeep thread reads them when a search finds
        them due (``_words_due``). A server calls it once opened; a process that
        searches once (a command, a hook) counts its words as before."""
        if bm25_top_path() is None or self.read_only:
            return
        from store.sqlite import doc_freq

        with self._all_lock:
            if self._common is None:
                self._common = doc_freq.CommonWords()
            for _, conn in self._all:
                doc_freq.share(conn, self._common)

    def _create_file(self) -> None:
        """Owner-only directory and file, created before SQLite opens it."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            if not self.path.exists():
                fd = os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600)
                os.close(fd)
        except OSError as ex:
            raise StoreError(f"cannot create {self.where.store}: {ex.strerror or ex}") from ex

    def _target(self) -> tuple[bool, str, int]:
        """Whether the store is read-only, and how connections open it: read-write, or
        read-only when SQLite can only open it so (its file system or the file refuses
        writes)."""
        with self._failures("open"):
            probe = apsw.Connection(str(self.path))
            try:
                read_only = probe.readonly("main")
            finally:
                probe.close()
        if not read_only:
            return False, str(self.path), apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
        if Path(f"{self.path}-shm").exists():
            # A writer may have it open through a writable path: read its log through
            # the shared-memory index, as any reader does.
            return True, str(self.path), apsw.SQLITE_OPEN_READONLY
        wal = Path(f"{self.path}-wal")
        if wal.exists() and wal.stat().st_size > 0:
            raise StoreReadOnly(
                f"{self.where.store} is read-only ({read_only_reason(self.data_dir)}) and "
                f"its log {wal} holds changes that SQLite can read only through a "
                "shared-memory file it cannot create here: open it once where it is "
                "writable (any `stenographer` command), then open it here again.",
                self.where, "open", "")
        # No log and no writer. Reading a WAL-mode file needs the shared-memory file,
        # which a read-only directory cannot hold: the file is read as immutable.
        uri = self.path.absolute().as_uri() + "?immutable=1"
        return True, uri, apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI

    @contextmanager
    def _failures(self, doing: Doing) -> Iterator[None]:
        """A driver error in the block leaves it as the StoreError of its condition."""
        try:
            yield
        except apsw.Error as ex:
            mapped = storage_failure(ex, self.where, doing)
            if mapped is None:
                raise
            raise mapped from ex

    def _open(self, *, mapped: bool = True) -> apsw.Connection:
        """A connection set up for this store; ``mapped``: pages read through the
        memory map (MMAP_BYTES), else read into its page cache."""
        try:
            conn = apsw.Connection(self._uri, flags=self._flags,
                                   statementcachesize=STATEMENT_CACHE)
        except apsw.Error as ex:
            raise (storage_failure(ex, self.where, "open")
                   or StoreError(f"cannot open {self.where.store}: {ex}")) from ex
        try:
            with self._failures("open"):
                conn.set_busy_timeout(self.busy_timeout_ms)
                if not self.read_only:  # a read-only store keeps the mode it has
                    conn.execute("PRAGMA journal_mode=WAL")
                    conn.set_wal_hook(self._committed)  # in place of SQLite's checkpoints
                conn.execute("PRAGMA synchronous="
                             f"{'FULL' if self.synchronous == 'full' else 'NORMAL'}")
                conn.execute("PRAGMA foreign_keys=ON")
                conn.execute("PRAGMA temp_store=MEMORY")
                conn.execute("PRAGMA secure_delete=FAST")  # forgotten text leaves no pages
                conn.execute(f"PRAGMA mmap_size={MMAP_BYTES if mapped else 0}")
                # The ranking function registers itself with a statement, which reads
                # the schema: a damaged file fails first here, with its own error.
                conn.execute("PRAGMA schema_version")
                conn.enable_load_extension(True)
                conn.load_extension(vec0_path())
                if (ranking := bm25_top_path()) is not None:
                    conn.load_extension(ranking, "sqlite3_bm25top_init")
                conn.enable_load_extension(False)
        except BaseException:
            conn.close()
            raise
        return conn

    def _committed(self, _conn: apsw.Connection, _name: str, pages: int) -> int:
        """After each commit of this process's connections: a log of ``CHECKPOINT_PAGES``
        or more is copied back into the file on the checkpoint thread (one at a time; a
        commit while it runs asks again). The commit returns without waiting for it,
        unless the log has reached ``CHECKPOINT_LIMIT``: then it waits for the thread and
        checkpoints itself."""
        if pages >= CHECKPOINT_LIMIT:  # writes back to back leave the thread no gap
            self.checkpoints.wait()
            self._checkpoint()
        elif pages >= CHECKPOINT_PAGES:
            self.checkpoints.start(self._checkpoint, "wal-checkpoint")
        return apsw.SQLITE_OK

    def _checkpoint(self) -> None:
        """A passive checkpoint, SQLite's own after a commit: it copies what no reader
        still needs and waits for nothing. On a bare connection of its own (no
        extension is read), closed when done."""
        try:
            conn = apsw.Connection(self._uri, flags=self._flags)
            try:
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            finally:
                conn.close()
        except apsw.Error as ex:  # the log stays: the next commit asks again
            print(f"stenographer: the write-ahead log was not checkpointed: {ex}",
                  file=sys.stderr)

    def connection(self) -> apsw.Connection:
        """This thread's connection (opened on first use). Opening one closes those of
        threads that have ended (the upkeep's, a thread pool's idle workers): each
        holds three file descriptors and its page cache until the store closes."""
        conn: apsw.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise StoreError("the store is closed")
            conn = self._open(mapped=not (self.upkeep.current() or self.checkpoints.current()))
            self._local.conn = conn
            with self._all_lock:
                ended = [c for thread, c in self._all if not thread.is_alive()]
                self._all = [(thread, c) for thread, c in self._all if thread.is_alive()]
                self._all.append((threading.current_thread(), conn))
                if self._common is not None:
                    from store.sqlite import doc_freq

                    doc_freq.share(conn, self._common)
            for done in ended:
                done.close()
        return conn

    def write(self) -> AbstractContextManager[apsw.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``): committed on success, else rolled
        back, also when the COMMIT itself fails (a deferred constraint, a full disk):
        SQLite then leaves the transaction open, and every later write of this
        thread would fail to begin."""
        return self._write(counted=True)

    def commits(self) -> int:
        """How many write transactions this thread has committed (stage traces aside):
        a call that failed tells by it whether it had stored anything before."""
        count: int = getattr(self._local, "commits", 0)
        return count

    @contextmanager
    def _write(self, *, counted: bool) -> Iterator[apsw.Connection]:
        conn = self._writable("write")
        with self._write_lock, self._failures("write"):
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if not conn.get_autocommit():
                    conn.execute("ROLLBACK")
                raise
        if counted:
            self._local.commits = self.commits() + 1

    @contextmanager
    def exclusive(self) -> Iterator[apsw.Connection]:
        """This thread's connection with the process's write lock held and no
        transaction open: for statements that cannot run in one (VACUUM, checkpoints).
        The checkpoint thread's run in flight ends first (no commit of this process
        starts another while the lock is held): SQLite answers a checkpoint asked while
        another runs with SQLITE_BUSY at once, without waiting, so a forget's rewrite
        would leave the old pages in the log."""
        conn = self._writable("rewrite")
        with self._write_lock, self._failures("rewrite"):
            self.checkpoints.wait()
            yield conn

    def _writable(self, doing: Doing) -> apsw.Connection:
        if self.read_only:
            raise failure("read_only", self.where, doing)
        return self.connection()

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
        with self._failures("read"):
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")

    def close(self) -> None:
        """Close every connection; the stage traces still buffered are written first
        (a StoreError if they cannot be, once the connections are closed)."""
        self.file_rewrite.close()
        self.upkeep.stop()  # a merge or flush in flight ends with its own connection open
        try:
            self.traces.close()
        finally:
            self._closed = True
            self.checkpoints.wait()  # the last commits' (the traces') included
            self._close_connections()

    def _close_connections(self) -> None:
        with self._all_lock:
            conns, self._all = self._all, []
        for _, conn in conns:
            conn.close()
