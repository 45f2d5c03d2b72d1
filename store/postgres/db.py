"""The PostgreSQL store: a connection pool behind the SQLite store's interface.

``read()`` and ``write()`` lend a pooled connection for one transaction (READ COMMITTED,
as PostgreSQL defaults; the statements that need more take row or advisory locks
themselves: the session chain head, the compression claim). A read inside a write on
the same thread uses the write's connection, as on SQLite.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from store.errors import Doing, StoreError, Where, storage_failure
from store.migrations import migrate_postgres
from store.postgres.connection import PgConnection
from store.postgres.kept import STORE_ID, forget_replaced_store
from store.postgres.keywords import BULK_LIMIT, DerivedKeywords, LexemeIndex
from store.postgres.vectors import PgVectorCache
from store.rewrite import FileRewrite, Rewritable, Rewritten
from store.runs import TraceBuffer
from store.sql import Conn, all_rows, first, one

__all__ = ["PgStore", "redact_url"]

POOL_MAX = 10  # connections a process holds at most; more graph runs queue for one
CONNECT_TIMEOUT_S = 10
POOL_WAIT_S = 30  # how long a run waits for a free connection before it fails


# Statistics a bulk load outgrows. Autovacuum analyzes a table once a tenth of it has
# changed, but only when it next looks (every minute by default): until then the
# planner plans a store that has grown from nothing, or doubled, as the store it was,
# and a session search takes about twice as long (docs/postgresql.md). A bulk write
# therefore analyzes the schema's tables itself once the turns (their ids: the newest
# is their count, less those forgotten) outnumber twice the rows the statistics were
# taken of, plus the server's own base threshold: about log2(turns) times over a
# store's growth, never after a write of a few turns.
STATISTICS_STALE = """
SELECT (SELECT coalesce(max(id), 0) FROM exchanges)
       > 2 * greatest(c.reltuples, 0) + current_setting('autovacuum_analyze_threshold')::real
FROM pg_class c WHERE c.oid = 'exchanges'::regclass"""
SCHEMA_TABLES = """
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'r' AND n.nspname = current_schema() ORDER BY c.relname"""

# The tables a forget deletes rows of, vacuumed after it.
SCRUBBED_TABLES = ("exchanges", "exchanges_fts", "exchange_vectors", "briefs", "runs",
                   "signal_flags")


def scrub_tables(store: Rewritable, vacuum: bool, wait_ms: int) -> Rewritten:
    """PostgreSQL's rewrite after a forget: the deleted rows' dead tuples reclaimed
    (VACUUM; VACUUM FULL would lock out every other server for the whole rewrite). Its
    files and its write-ahead log are the server's to recycle."""
    with store.exclusive() as conn:
        for table in SCRUBBED_TABLES:
            conn.execute(f"VACUUM {table}")
    return Rewritten(vacuumed=True, log_emptied=False, pending=False)


def redact_url(url: str) -> str:
    """``url`` without its password (``user:password@`` or a ``password=`` parameter),
    for messages and status."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        netloc = netloc.replace(f":{parts.password}@", ":***@")
    query = "&".join("password=***" if p.split("=", 1)[0] == "password" else p
                     for p in parts.query.split("&")) if parts.query else ""
    return urlunsplit(parts._replace(netloc=netloc, query=query))


class PgStore:
    """A PostgreSQL database shared by any number of server processes. Thread-safe."""

    dialect = "postgresql"
    read_only = False
    file: Path | None = None

    def __init__(self, url: str, *, data_dir: Path, vector_dim: int = 256,
                 pool_max: int = POOL_MAX) -> None:
        self.url = url
        self.location = redact_url(url)
        self.data_dir = data_dir
        # A lock wait ends at the server's lock_timeout (none by default), not here.
        self.where = Where(f"the database {self.location}", None, None)
        self.vectors = PgVectorCache(vector_dim, data_dir)
        # Trace writes are bookkeeping: they do not count as the calls' commits.
        self.traces = TraceBuffer(lambda: self._transaction("BEGIN", "write", counted=False))
        self.file_rewrite = FileRewrite(self, scrub_tables)
        # Chooses a large store's store-wide search candidates; opened at its size.
        self.keywords = DerivedKeywords(self, data_dir)
        self._local = threading.local()
        options: dict[str, Any] = {
            "autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S,
            # Parameters bound client-side, as literals: the server infers their types
            # from context as SQLite does (e.g. `? IS NULL`).
            "cursor_factory": psycopg.ClientCursor}
        try:  # one direct connection first: a refused or bad URL fails at once, clearly
            with psycopg.connect(url, **options) as raw:
                conn = PgConnection(raw)
                self.schema_version = migrate_postgres(conn, vector_dim)
                store_id = first(conn, STORE_ID)
                if store_id is not None:
                    forget_replaced_store(data_dir, conn.database, str(store_id[0]))
        except psycopg.Error as ex:
            raise (storage_failure(ex, self.where, "open")
                   or StoreError(f"cannot open the database {self.location}: "
                                 f"{self._scrub(str(ex).strip())}")) from ex
        self._pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            url, min_size=1, max_size=pool_max, open=True, name="stenographer",
            kwargs=options, timeout=POOL_WAIT_S)

    def _scrub(self, message: str) -> str:
        """``message`` without the URL's password (a driver may quote the URL back)."""
        password = urlsplit(self.url).password
        return message.replace(password, "***") if password else message

    @contextmanager
    def _transaction(self, begin: str, doing: Doing, *, counted: bool = False
                     ) -> Iterator[PgConnection]:
        current: PgConnection | None = getattr(self._local, "conn", None)
        if current is not None:  # nested in this thread's open transaction
            yield current
            return
        with self._borrowed(doing) as raw:
            conn = PgConnection(raw, self.keywords)
            conn.begin_with_first(begin)
            self._local.conn = conn
            try:
                yield conn
            except BaseException:
                self._local.conn = None
                if not raw.closed and conn.begun:
                    conn.execute("ROLLBACK")
                raise
            self._local.conn = None
            if conn.begun:
                conn.execute("COMMIT")
        if counted:
            self._local.commits = self.commits() + 1

    def commits(self) -> int:
        """How many write transactions this thread has committed (stage traces aside):
        a call that failed tells by it whether it had stored anything before."""
        count: int = getattr(self._local, "commits", 0)
        return count

    @contextmanager
    def _borrowed(self, doing: Doing) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection; a lost server or an exhausted pool is a StoreError that
        names the database (without its password), and so is a storage condition (a
        full disk, a read-only server, an I/O error, damage, a lock wait that ran out)."""
        try:
            with self._pool.connection() as raw:
                yield raw
        except psycopg.Error as ex:
            mapped = storage_failure(ex, self.where, doing)
            if mapped is not None:
                raise mapped from ex
            if isinstance(ex, PoolTimeout):
                raise StoreError(f"no free connection to {self.location} within "
                                 f"{POOL_WAIT_S} s ({POOL_MAX} in use)") from ex
            if isinstance(ex, psycopg.OperationalError):
                raise StoreError(f"the database {self.location} failed: "
                                 f"{self._scrub(str(ex))}") from ex
            raise

    @contextmanager
    def write(self) -> Iterator[PgConnection]:
        """One write transaction: committed on success, else rolled back."""
        with self._transaction("BEGIN", "write", counted=True) as conn:
            yield conn

    @contextmanager
    def read(self) -> Iterator[PgConnection]:
        """A consistent snapshot for several reads."""
        with self._transaction("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
                               "read") as conn:
            yield conn

    @contextmanager
    def exclusive(self) -> Iterator[PgConnection]:
        """A connection with no transaction open (maintenance statements)."""
        with self._borrowed("rewrite") as raw:
            yield PgConnection(raw)

    @contextmanager
    def scrubbing(self) -> Iterator[None]:
        """Nothing to switch: PostgreSQL leaves deleted rows as dead tuples until VACUUM
        (``scrub_tables``) reclaims them."""
        yield

    def keyword_index(self) -> None:
        """None: no SQLite-style derived index (PostgreSQL's is ``keywords``)."""
        return None

    def warm(self) -> None:
        """Do now what a first search would do before its own work: load the in-memory
        copy of the vectors (a binary COPY of every row) and ask the derived keyword
        index whether it can answer (a large store: it is opened, and taken up to date
        on a thread when a bulk write left it behind by more than a search steps
        around). Call outside a transaction."""
        with self.read() as conn:
            self.vectors.refresh(conn)
            self.keywords.answering(conn)

    def serves(self) -> None:
        """Nothing more to keep: PostgreSQL's keyword search counts its words itself."""

    def keywords_need_rebuild(self) -> bool:
        """False: the derived index takes in what it lacks at its next search."""
        return False

    def audited_keywords(self) -> LexemeIndex | None:
        """The derived keyword index (``keywords``) once the store has one."""
        return self.keywords.audited()

    def searched_keywords(self, conn: Conn) -> None:
        """None: a search asks ``keywords`` itself (``store.postgres.search``)."""
        return None

    def after_bulk_write(self) -> int:
        """After a bulk write or a forget:
        - the planner's statistics are taken again (ANALYZE of every table of the
          schema) once the store holds more than twice the turns they were taken of;
        - more than ``BULK_LIMIT`` turns past the derived keyword index's watermark
          (which searches would leave to PostgreSQL alone until a thread had taken them
          in) are taken in now, by the writer that wrote them;
        - an index that holds a forgotten turn is written again.
        How many turns the index took in."""
        with self.exclusive() as conn:
            if one(conn, STATISTICS_STALE)[0]:
                tables = [row[0] for row in all_rows(conn, SCHEMA_TABLES)]
                conn.execute("ANALYZE " + ", ".join(f'"{t}"' for t in tables))
        return self.keywords.catch_up(beyond=BULK_LIMIT)

    def close(self) -> None:
        """Close the pool; the stage traces still buffered are written first (a
        StoreError if they cannot be, once the pool is closed)."""
        self.file_rewrite.close()
        self.keywords.wait()
        self.vectors.wait()
        try:
            self.traces.close()
        finally:
            self._pool.close()
