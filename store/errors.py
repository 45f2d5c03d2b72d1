"""The project's one exception root, and what a failing database means to a user.

    StenoError                  every error this project raises on purpose
    ├── InvalidInput            bad input from a caller: says what was wrong and what is valid
    ├── NotFound                a session, exchange or run that does not exist
    ├── StoreError              the database could not do what was asked
    │   └── StorageFailure      a storage condition, with where and in which step:
    │       ├── StoreFull           the disk holding it is full
    │       ├── StoreReadOnly       it is read-only (file system, permissions, standby)
    │       ├── StoreIOError        the disk or the server reported an I/O error
    │       ├── StoreCorrupt        the file or an index is damaged
    │       └── StoreBusy           another process held its lock beyond the wait
    └── EmbeddingError          the optional embedding provider failed (nodes.extract.
                                embeddings); never fails an ingest, only delays vectors

User-facing errors reach MCP clients as the text of an ``isError`` result and CLI users
as a message with exit code 2. Errors carry context: ``graph`` and ``node`` are filled
in by the graph runner, ``exchange_id`` where known. ``code`` is a lowercase dotted
name; ``retryable`` is read by the graph engine.

``storage_failure`` is the one translation of a database driver's error (SQLite through
apsw, PostgreSQL through psycopg) into one of the ``StoreError`` conditions above, with
a message that says what happened, what it means for the call, and what to do. The
stores apply it at their transaction boundaries, so nothing above them sees a driver
error for these conditions.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import apsw

__all__ = [
    "Condition",
    "Doing",
    "InvalidInput",
    "NotFound",
    "StenoError",
    "StorageFailure",
    "StoreBusy",
    "StoreCorrupt",
    "StoreError",
    "StoreFull",
    "StoreIOError",
    "StoreReadOnly",
    "Where",
    "failure",
    "partly_done",
    "read_only_reason",
    "storage_failure",
]


class StenoError(Exception):
    code = "steno.error"
    retryable = False
    user_facing = False

    def __init__(self, message: str, *, exchange_id: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.exchange_id = exchange_id
        self.graph: str | None = None
        self.node: str | None = None


class InvalidInput(StenoError):
    code = "steno.invalid_input"
    user_facing = True


class NotFound(StenoError):
    code = "steno.not_found"
    user_facing = True


class StoreError(StenoError):
    code = "steno.store"
    user_facing = True


# What the failed step was doing: it decides what the message says about the call.
# "partial": a write failed after the same call had committed others (``partly_done``).
Doing = Literal["open", "read", "write", "partial", "rewrite"]
Condition = Literal["full", "read_only", "io", "corrupt", "busy"]
_OUTCOME: dict[str, str] = {
    "open": "the store could not be opened",
    "read": "nothing could be read",
    "write": "nothing was stored or changed",
    "partial": ("the call was done only in part: what it stored before this step stays "
                "(e.g. the turn), the rest was not stored"),
    "rewrite": "the file was not rewritten (what was already committed stays)",
}


@dataclass(frozen=True)
class Where:
    """How messages name a store: the SQLite file and its directory, or a database."""

    store: str  # "the store /x/steno.db" or "the database postgresql://u:***@h/db"
    directory: Path | None  # the SQLite file's directory; None for a database server
    busy_wait_s: float | None  # how long a writer waits for a lock; None: the server's

    @property
    def disk(self) -> str:
        if self.directory is None:
            return "the database server's disk"
        return f"the disk holding {self.directory}"


class StorageFailure(StoreError):
    """A storage condition met by one step of a call; the message says what happened,
    what it means for the call and what to do (``failure`` builds it)."""

    def __init__(self, message: str, where: Where, doing: Doing, detail: str) -> None:
        super().__init__(message)
        self.where, self.doing, self.detail = where, doing, detail


class StoreFull(StorageFailure):
    code = "steno.store.full"


class StoreReadOnly(StorageFailure):
    code = "steno.store.read_only"


class StoreIOError(StorageFailure):
    code = "steno.store.io_error"


class StoreCorrupt(StorageFailure):
    code = "steno.store.corrupt"


class StoreBusy(StorageFailure):
    code = "steno.store.busy"


_CONDITIONS: dict[type[StorageFailure], Condition] = {
    StoreFull: "full", StoreReadOnly: "read_only", StoreIOError: "io",
    StoreCorrupt: "corrupt", StoreBusy: "busy"}


def read_only_reason(directory: Path) -> str:
    """Why a store in ``directory`` cannot be written, as far as the system says."""
    try:
        if os.statvfs(directory).f_flag & os.ST_RDONLY:
            return "its file system is mounted read-only"
    except OSError:
        pass
    return "this user may not write the file or its directory"


def _condition(ex: BaseException) -> Condition | None:
    """The storage condition behind a driver error, or None if it is not one."""
    if isinstance(ex, apsw.FullError):
        return "full"
    if isinstance(ex, apsw.ReadOnlyError):
        return "read_only"
    if isinstance(ex, apsw.IOError):
        return "io"
    if isinstance(ex, apsw.CorruptError | apsw.NotADBError):
        return "corrupt"
    if isinstance(ex, apsw.BusyError | apsw.LockedError):
        return "busy"
    # psycopg's errors carry the SQLSTATE; psycopg is optional, so it is not imported.
    if type(ex).__module__.startswith("psycopg"):
        return _SQLSTATES.get(str(getattr(ex, "sqlstate", None) or ""))
    return None


_SQLSTATES: dict[str, Condition] = {
    "53100": "full",  # disk_full
    "25006": "read_only",  # read_only_sql_transaction (a standby, or read-only by default)
    "58030": "io",  # io_error
    "XX001": "corrupt",  # data_corrupted
    "XX002": "corrupt",  # index_corrupted
    "55P03": "busy",  # lock_not_available (lock_timeout, NOWAIT)
}


def storage_failure(ex: BaseException, where: Where, doing: Doing) -> StorageFailure | None:
    """``ex`` as the StoreError of its condition, or None when it is not a storage
    condition (a bug, a constraint, a syntax error: those stay what they are)."""
    condition = _condition(ex)
    if condition is None:
        return None
    detail = str(ex).splitlines()[0] if str(ex) else type(ex).__name__
    return failure(condition, where, doing, detail)


def partly_done(ex: StorageFailure) -> StorageFailure:
    """``ex`` told of a call that had committed other writes before the failing one."""
    if ex.doing not in ("read", "write"):
        return ex  # what an open or a rewrite failure says holds either way
    return failure(_CONDITIONS[type(ex)], ex.where, "partial", ex.detail)


def failure(condition: Condition, where: Where, doing: Doing, detail: str = ""
            ) -> StorageFailure:
    """The error of a storage condition: what happened, what it means for the call
    (``doing``), and what to do."""
    outcome = _OUTCOME[doing]
    reads = "; reads keep working" if doing in ("write", "partial", "rewrite") else ""
    if condition == "full":
        return StoreFull(f"{where.disk} is full: {outcome}. Free some space there and "
                         f"try again{reads}.", where, doing, detail)
    if condition == "read_only":
        why = (read_only_reason(where.directory) if where.directory is not None
               else "a standby server, or default_transaction_read_only is on")
        return StoreReadOnly(f"{where.store} is read-only ({why}): {outcome}{reads}. To "
                             "record, make it writable, then start the server or command "
                             "again.", where, doing, detail)
    if condition == "io":
        return StoreIOError(f"{where.disk} reported an I/O error ({detail}): {outcome}. "
                            "Check the disk (e.g. dmesg), then run `stenographer audit`.",
                            where, doing, detail)
    if condition == "corrupt":
        return StoreCorrupt(f"{where.store} is damaged ({detail}): {outcome}. Run "
                            "`stenographer audit` and `stenographer doctor`; restore it "
                            "from a backup if they fail.", where, doing, detail)
    waited = ("longer than the server's lock_timeout" if where.busy_wait_s is None
              else f"for more than {where.busy_wait_s:g} s")
    return StoreBusy(f"{where.store} stayed locked by another process {waited}: "
                     f"{outcome}. Try again once that process (a long forget, graphrag "
                     "extract, migrate or import) is done.", where, doing, detail)
