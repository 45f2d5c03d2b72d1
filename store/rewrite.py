"""Rewriting the store after a forget, until no page of the file holds what was deleted.

``scrub_file`` merges the keyword index (it keeps deleted entries until its segments merge),
rebuilds the file from live rows (``VACUUM``) and copies it back from the write-ahead
log, emptying the log, which still held the old pages (``wal_checkpoint(TRUNCATE)``).
The checkpoint cannot finish while another connection, in any process, holds a read
snapshot older than the rewrite: that reader may still need the old pages, so both the
file and the log keep them until it lets go.

The rewrite is therefore recorded as pending in ``meta`` in the forget's own
transaction, and ``FileRewrite`` (one per store) finishes it: at once when it can, else
retried in the background (quickly, without waiting on readers) until it succeeds; a
server also finishes what another process left pending (a forget on the command line,
a process that stopped first). ``rewrite_status`` says pending since when, or done
when, to any process (``stenographer status``).
PostgreSQL's store gives ``FileRewrite`` its own attempt instead
(``store.postgres.db.scrub_tables``: it vacuums the affected tables; its files and its
log are the server's).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import apsw

from store.errors import StoreError
from store.sql import Conn, Transactions, all_rows, first


class Rewritable(Transactions, Protocol):
    """What a rewrite needs of a store beyond its transactions."""

    def exclusive(self) -> AbstractContextManager[Conn]: ...

__all__ = [
    "REWRITE_KEYS",
    "FileRewrite",
    "Rewritable",
    "Rewritten",
    "Scrub",
    "mark_rewrite_pending",
    "rewrite_status",
    "scrub_file",
]

FIRST_WAIT_MS = 1_000  # how long a forget waits for readers before leaving it to retries
RETRY_FIRST_S, RETRY_MAX_S = 0.1, 2.0  # background retries: doubling delays

WATCH_S = 2.0  # a server checks this often for rewrites that other processes left

# meta keys: the pending rewrite's mark (the forget's unix time), the mark whose VACUUM
# already ran (only the checkpoint is left), when the last rewrite was done.
PENDING, VACUUMED, DONE = "rewrite_pending", "rewrite_vacuumed", "rewrite_done"
REWRITE_KEYS = (PENDING, VACUUMED, DONE)  # they describe one store's file: never copied
SET_META = """
INSERT INTO meta(key, value) VALUES (?, ?)
ON CONFLICT(key) DO UPDATE SET value = excluded.value"""
DELETE_META = "DELETE FROM meta WHERE key = ?"
DELETE_PENDING = f"DELETE FROM meta WHERE key = '{PENDING}' AND value = ?"
SELECT_MARKS = f"SELECT key, value FROM meta WHERE key IN ('{PENDING}', '{VACUUMED}')"
SELECT_REWRITE = f"SELECT key, value FROM meta WHERE key IN ('{PENDING}', '{DONE}')"

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


# One attempt at the rewrite, the dialect's: (store, vacuum, wait_ms).
Scrub = Callable[[Rewritable, bool, int], Rewritten]


def scrub_file(store: Rewritable, vacuum: bool, wait_ms: int) -> Rewritten:
    """SQLite's attempt: the file rebuilt from its live rows (VACUUM) and its
    write-ahead log emptied; ``vacuum=False`` when this process's VACUUM already ran
    since the last deletions and only the log remains. Never waits more than
    ``wait_ms`` for other connections (a lock or a snapshot they hold leaves it
    pending)."""
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
    """Finishes the pending rewrite of one store: now, or in the background. Thread-safe.

    What is pending, and whether its ``VACUUM`` already ran, is read from ``meta`` at
    every attempt, so any process can finish what another one began.
    """

    def __init__(self, store: Rewritable, scrub: Scrub = scrub_file) -> None:
        self._store = store
        self._scrub = scrub
        self._lock = threading.Lock()
        self._wake = threading.Event()  # a rewrite to retry now
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._watching = False  # keep checking for rewrites other processes left

    def run(self) -> Rewritten:
        """Rewrite the file (after a forget marked it pending). What other connections
        hold up is finished in the background."""
        result = self._attempt(FIRST_WAIT_MS)
        if result.pending:
            self._start()
        return result

    def watch(self) -> None:
        """Finish any rewrite left pending, now and whenever one shows up: by a process
        that stopped first, or by a forget in a process that exits (the command line).
        Servers call it at start; a check is one read of ``meta`` every WATCH_S."""
        with self._lock:
            self._watching = True
        self._start()

    def _attempt(self, wait_ms: int) -> Rewritten:
        with self._store.read() as conn:
            marks = {str(k): str(v) for k, v in all_rows(conn, SELECT_MARKS)}
        mark = marks.get(PENDING)  # a later forget's mark differs: it stays pending
        if mark is None:
            return Rewritten(vacuumed=False, log_emptied=False, pending=False)
        result = self._scrub(self._store, marks.get(VACUUMED) != mark, wait_ms)
        if result.pending:
            if result.vacuumed:  # the next attempt, in any process, only checkpoints
                with self._store.write() as conn:
                    conn.execute(SET_META, (VACUUMED, mark))
            return result
        with self._store.write() as conn:
            conn.execute(DELETE_PENDING, (mark,))
            conn.execute(DELETE_META, (VACUUMED,))
            conn.execute(SET_META, (DONE, repr(time.time())))
        return result

    def _start(self) -> None:
        with self._lock:
            self._wake.set()
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(target=self._loop, name="steno-rewrite",
                                                daemon=True)
                self._thread.start()

    def _loop(self) -> None:
        delay = RETRY_FIRST_S
        while True:
            if self._wake.wait(delay):
                self._wake.clear()
                delay = RETRY_FIRST_S
            if self._stop.is_set():
                return
            try:
                pending = self._attempt(0).pending
            except (apsw.Error, StoreError):  # busy, or the store is closing: next round
                pending = True
            if pending:
                delay = min(delay * 2, RETRY_MAX_S)
                continue
            with self._lock:  # a wake-up set under the lock is never missed
                if not self._watching and not self._wake.is_set():
                    self._thread = None
                    return
            delay = WATCH_S

    def close(self) -> None:
        """Stop retrying (a rewrite still pending is finished by the next server)."""
        with self._lock:
            self._stop.set()
            self._wake.set()
            thread = self._thread
        if thread is not None:
            thread.join()
