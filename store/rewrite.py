"""Rewriting the store after a forget, until no page of the file holds what was deleted.

``scrub`` merges the keyword index (it keeps deleted entries until its segments merge),
rebuilds the file from live rows (``VACUUM``) and copies it back from the write-ahead
log, emptying the log, which still held the old pages (``wal_checkpoint(TRUNCATE)``).
The checkpoint cannot finish while another connection, in any process, holds a read
snapshot older than the rewrite: that reader may still need the old pages, so both the
file and the log keep them until it lets go.

The rewrite is therefore recorded as pending in ``meta`` in the forget's own
transaction, and ``FileRewrite`` (one per store) finishes it: at once when it can, else
retried in the background (quickly, without waiting on readers) until it succeeds, and
resumed by the next server start when this process stopped first. ``rewrite_status``
says pending since when, or done when, to any process (``stenographer status``).
PostgreSQL vacuums the affected tables instead: its files and its log are the server's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import apsw

from store.errors import StoreError
from store.sql import Conn, all_rows, first

if TYPE_CHECKING:
    from store.backend import Backend

__all__ = [
    "FileRewrite",
    "Rewritten",
    "mark_rewrite_pending",
    "rewrite_status",
    "scrub",
]

FIRST_WAIT_MS = 1_000  # how long a forget waits for readers before leaving it to retries
RETRY_FIRST_S, RETRY_MAX_S = 0.1, 2.0  # background retries: doubling delays

PENDING, DONE = "rewrite_pending", "rewrite_done"  # meta keys; values: unix times
SET_META = """
INSERT INTO meta(key, value) VALUES (?, ?)
ON CONFLICT(key) DO UPDATE SET value = excluded.value"""
SELECT_PENDING = f"SELECT value FROM meta WHERE key = '{PENDING}'"
DELETE_PENDING = f"DELETE FROM meta WHERE key = '{PENDING}' AND value = ?"
SELECT_REWRITE = f"SELECT key, value FROM meta WHERE key IN ('{PENDING}', '{DONE}')"

SCRUBBED_TABLES = ("exchanges", "exchanges_fts", "exchange_vectors", "briefs", "runs",
                   "signal_flags")
OPTIMIZE_FTS = "INSERT INTO exchanges_fts(exchanges_fts) VALUES ('optimize')"
CHECKPOINT = "PRAGMA wal_checkpoint(TRUNCATE)"


def mark_rewrite_pending(conn: Conn, now: float) -> None:
    """Record that the file must be rewritten (inside the forget's write transaction,
    so that a process stopped before the rewrite leaves it pending, not forgotten)."""
    conn.execute(SET_META, (PENDING, repr(now)))


def rewrite_status(conn: Conn) -> dict[str, Any]:
    """``state`` pending, done or none, with ``pending_since`` and ``done_at`` (unix
    times or None)."""
    values = {str(k): float(v) for k, v in all_rows(conn, SELECT_REWRITE)}
    pending, done = values.get(PENDING), values.get(DONE)
    state = "pending" if pending is not None else "done" if done is not None else "none"
    return {"state": state, "pending_since": pending, "done_at": done}


@dataclass(frozen=True)
class Rewritten:
    vacuumed: bool  # this attempt rebuilt the file from live rows (SQLite: VACUUM) or
    #                 vacuumed the tables (PostgreSQL)
    log_emptied: bool  # the write-ahead log was copied back and emptied (SQLite)
    pending: bool  # not finished yet: retried in the background


@contextmanager
def _waiting(conn: Any, wait_ms: int) -> Iterator[None]:
    """This connection waits at most ``wait_ms`` for a lock held elsewhere."""
    before = int(first(conn, "PRAGMA busy_timeout")[0])  # type: ignore[index]
    conn.execute(f"PRAGMA busy_timeout={int(wait_ms)}")
    try:
        yield
    finally:
        conn.execute(f"PRAGMA busy_timeout={before}")


def scrub(store: Backend, *, vacuum: bool, wait_ms: int) -> Rewritten:
    """One attempt at the rewrite; ``vacuum=False`` when this process's VACUUM already
    ran since the last deletions and only the log remains. Never waits more than
    ``wait_ms`` for other connections (a lock or a snapshot they hold leaves it
    pending)."""
    if store.dialect == "postgresql":
        with store.exclusive() as conn:  # dead rows reclaimed; VACUUM FULL would lock out
            for table in SCRUBBED_TABLES:  # every other server for the whole rewrite
                conn.execute(f"VACUUM {table}")
        return Rewritten(vacuumed=True, log_emptied=False, pending=False)
    with store.exclusive() as conn, _waiting(conn, wait_ms):
        try:
            if vacuum:
                conn.execute(OPTIMIZE_FTS)
                conn.execute("VACUUM")
        except apsw.BusyError:  # another process writes: try again later
            return Rewritten(vacuumed=False, log_emptied=False, pending=True)
        row = first(conn, CHECKPOINT)
    emptied = row is not None and row[0] == 0
    return Rewritten(vacuumed=vacuum, log_emptied=emptied, pending=not emptied)


class FileRewrite:
    """Finishes a pending rewrite of one store: now, or in the background. Thread-safe."""

    def __init__(self, store: Backend) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._deletions = 0  # forgets this process rewrote after (a generation count)
        self._vacuumed = False  # the file was rebuilt since the latest of them

    def run(self) -> Rewritten:
        """Rewrite the file (after a forget marked it pending). What other connections
        hold up is finished in the background."""
        with self._lock:
            self._deletions += 1
            self._vacuumed = False
            deletions = self._deletions
        result = self._attempt(True, FIRST_WAIT_MS, deletions)
        if result.pending:
            self._start()
        return result

    def resume(self) -> bool:
        """Finish, in the background, a rewrite that a stopped process left pending;
        True when there was one."""
        with self._store.read() as conn:
            pending: bool = rewrite_status(conn)["state"] == "pending"
        if pending:
            self._start()
        return pending

    def _attempt(self, vacuum: bool, wait_ms: int, deletions: int) -> Rewritten:
        with self._store.read() as conn:
            row = first(conn, SELECT_PENDING)
        marked = None if row is None else row[0]  # a later forget's mark stays
        result = scrub(self._store, vacuum=vacuum, wait_ms=wait_ms)
        with self._lock:
            if result.vacuumed and deletions == self._deletions:
                self._vacuumed = True
        if not result.pending:
            with self._store.write() as conn:
                conn.execute(DELETE_PENDING, (marked,))
                conn.execute(SET_META, (DONE, repr(time.time())))
        return result

    def _start(self) -> None:
        with self._lock:
            running = self._thread is not None and self._thread.is_alive()
            if running or self._stop.is_set():
                return
            self._thread = threading.Thread(target=self._retry, name="steno-rewrite",
                                            daemon=True)
            self._thread.start()

    def _retry(self) -> None:
        delay = RETRY_FIRST_S
        while not self._stop.wait(delay):
            with self._lock:
                vacuum, deletions = not self._vacuumed, self._deletions
            try:
                if not self._attempt(vacuum, 0, deletions).pending:
                    return
            except (apsw.Error, StoreError):  # busy, or the store is closing: next round
                pass
            delay = min(delay * 2, RETRY_MAX_S)

    def close(self) -> None:
        """Stop retrying (a rewrite left pending is resumed by the next server start)."""
        self._stop.set()
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join()
