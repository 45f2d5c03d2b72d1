"""The store interface the nodes use, and the choice of its backend.

Two backends implement it: ``store.db.Store`` (the SQLite file, the default) and
``store.postgres.db.PgStore`` (a shared PostgreSQL database, selected by
``STENO_DATABASE_URL=postgresql://...``). Both lend connections that run the store
modules' statements (``store.sql.Conn``).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from constants import is_postgres_url
from store.errors import InvalidInput

if TYPE_CHECKING:  # numpy and zstandard load with the store, not with the settings
    from store.audit import AuditedKeywords
    from store.keyword_index import KeywordIndex
    from store.rewrite import FileRewrite
    from store.runs import TraceBuffer
    from store.sql import Conn
    from store.vectors import VectorCache

__all__ = ["Backend", "is_postgres_url", "open_store"]

class Backend(Protocol):
    dialect: str  # "sqlite" | "postgresql"
    location: str  # the file path, or the database URL without its password
    data_dir: Path  # where the process keeps its own files (capture locks, the bus)
    file: Path | None  # the SQLite file; None for PostgreSQL (its files are the server's)
    read_only: bool  # opened read-only: every read works, write() and exclusive() refuse
    traces: TraceBuffer
    file_rewrite: FileRewrite  # finishes the rewrite after a forget (store.rewrite)

    @property
    def vectors(self) -> VectorCache: ...

    def read(self) -> AbstractContextManager[Conn]: ...
    def write(self) -> AbstractContextManager[Conn]: ...
    def exclusive(self) -> AbstractContextManager[Conn]: ...
    def commits(self) -> int:
        """Write transactions this thread has committed, stage traces aside."""
    def scrubbing(self) -> AbstractContextManager[None]:
        """Writes inside it overwrite what they delete (forgetting)."""
    def keyword_index(self) -> KeywordIndex | None:
        """The derived keyword index beside a writable SQLite file; None otherwise
        (PostgreSQL's is ``audited_keywords``). Call outside a transaction."""
    def keywords_need_rebuild(self) -> bool:
        """Whether the derived keyword index must be written again from the turns
        (``stenographer index rebuild``) before searches use it: a SQLite store that
        reached its size without one, or whose index was not built for it. Reads no
        index; False for PostgreSQL, whose index catches up by itself."""
    def audited_keywords(self) -> AuditedKeywords | None:
        """The derived keyword index as the contract audit checks it (either backend's);
        None when the store has none. Call outside a transaction."""
    def searched_keywords(self, conn: Conn) -> KeywordIndex | None:
        """The derived keyword index when it should answer a search in ``conn``'s
        snapshot (a large store, its queue short), else None: FTS5 or PostgreSQL
        answers. Writes nothing in ``conn``; a long queue is moved in beside it."""
    def warm(self) -> None:
        """Do now what a first search would do before its own work: load the vectors'
        in-memory copy, open the derived keyword index where one is kept. Call outside a
        transaction."""
    def serves(self) -> None:
        """Called once by a server after opening: keep between searches what a server's
        many searches share (SQLite: the FTS5 index's common words; PostgreSQL: nothing
        more). A process that searches once (a command, a hook) does not call it."""
    def after_bulk_write(self) -> int:
        """What keeps searches as fast after a bulk write (or a forget) as before it, done
        now in this thread: the derived keyword index takes in a queue a search would
        not use (``BULK_QUEUE``); PostgreSQL's planner statistics are taken again once
        the store has outgrown them. How many turns the index took in. Call outside a
        transaction."""
    def close(self) -> None: ...


def open_store(db_path: Path, *, database_url: str | None = None, synchronous: str = "normal",
               vector_dim: int = 256, busy_timeout_ms: int | None = None) -> Backend:
    """The SQLite file at ``db_path``, or the PostgreSQL database ``database_url`` names.
    ``busy_timeout_ms``: how long a SQLite statement waits for another process's lock
    (default ``store.db.BUSY_TIMEOUT_MS``; a host's hook waits less)."""
    if database_url is None or database_url == "":
        from store.db import BUSY_TIMEOUT_MS, Store

        return Store(db_path, synchronous=synchronous, vector_dim=vector_dim,
                     busy_timeout_ms=busy_timeout_ms or BUSY_TIMEOUT_MS)
    if not is_postgres_url(database_url):
        raise InvalidInput(
            "STENO_DATABASE_URL must be a postgresql:// or postgres:// URL "
            "(leave it unset for the SQLite file)"
        )
    try:
        from store.postgres.db import PgStore
    except ImportError as ex:
        raise InvalidInput(
            "STENO_DATABASE_URL names PostgreSQL but psycopg is not installed: "
            "pip install 'omega-stenographer-mcp[postgres]'"
        ) from ex
    return PgStore(database_url, data_dir=db_path.parent, vector_dim=vector_dim)
