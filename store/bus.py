"""The coordination bus shared by the Omega/VERITAS tools (issue #8 item 3).

The bus is another program's SQLite file (``$VERITAS_SHARED_DIR/coordination.sqlite``)
with the tables ``events(id, task_id, event_type, payload, created_at)`` and
``receipts(consumer, event_id)``. The stenographer reads the
``CLAEG_TERMINAL_SHUTDOWN`` events of a task (task id = session id) that it has not
acknowledged yet, and acknowledges each with a receipt once the event is stored as a turn.

The bus sits on the ingest path, so it must never fail or slow an ingest: it is opened
per call (a replaced or repaired file is seen at once), read-only for reads and
read-write without create for receipts, with a short busy timeout. After a failure
(locked, corrupt, not a bus) calls are skipped for a back-off that doubles up to a
minute; a missing file costs one ``stat`` and is not backed off, so a bus that appears
is used at the next ingest. ``Bus.health`` is what ``stenographer_capture_status``
reports; ``Bus.probe`` checks the file live.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw

from store.sql import all_rows, one

__all__ = ["BUS_FILE", "CONSUMER", "SHUTDOWN", "Bus", "BusEvent", "BusHealth"]

BUS_FILE = "coordination.sqlite"
CONSUMER = "omega-stenographer"
SHUTDOWN = "CLAEG_TERMINAL_SHUTDOWN"
RETRY_S, MAX_RETRY_S = 1.0, 60.0

SELECT_PENDING = """
SELECT e.id, e.task_id, e.payload, e.created_at FROM events e
WHERE e.task_id = ?1 AND e.event_type = ?2
  AND NOT EXISTS (SELECT 1 FROM receipts r WHERE r.consumer = ?3 AND r.event_id = e.id)
ORDER BY e.created_at, e.id LIMIT ?4"""
COUNT_PENDING = """
SELECT count(*) FROM events e WHERE e.event_type = ?1
  AND NOT EXISTS (SELECT 1 FROM receipts r WHERE r.consumer = ?2 AND r.event_id = e.id)"""
# Whatever the bus's own constraints, a receipt is written once: the check and the insert
# run in one BEGIN IMMEDIATE transaction, which serialises every writer of the file.
INSERT_RECEIPT = """
INSERT INTO receipts(consumer, event_id) SELECT ?1, ?2
WHERE NOT EXISTS (SELECT 1 FROM receipts WHERE consumer = ?1 AND event_id = ?2)"""


@dataclass(frozen=True)
class BusEvent:
    id: int | str  # as the bus stores it; receipts name it the same way
    task_id: str
    payload: str | None
    created_at: Any  # ISO text or epoch seconds, as the writer chose


@dataclass
class BusHealth:
    """This process's last dealings with the bus (guarded by ``Bus._lock``)."""

    state: str = "unknown"  # ok, missing, locked, corrupt, unusable; unknown before use
    detail: str | None = None
    last_ok_at: float | None = None  # wall-clock seconds
    last_error: str | None = None
    last_error_at: float | None = None
    failures: int = 0  # consecutive
    retry_at: float = 0.0  # monotonic; calls before it are skipped
    skipped: int = 0  # calls skipped during back-offs
    acknowledged: int = 0  # receipts written by this process


class BusUnavailable(Exception):
    def __init__(self, state: str, detail: str) -> None:
        super().__init__(detail)
        self.state, self.detail = state, detail


def _classify(ex: apsw.Error) -> BusUnavailable:
    if isinstance(ex, apsw.BusyError | apsw.LockedError):
        return BusUnavailable("locked", f"locked by another program ({ex})")
    if isinstance(ex, apsw.NotADBError | apsw.CorruptError):
        return BusUnavailable("corrupt", f"not a readable SQLite database ({ex})")
    return BusUnavailable("unusable", f"{type(ex).__name__}: {ex}")


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


class Bus:
    """The coordination bus file and this process's health record. Thread-safe."""

    def __init__(self, path: Path, *, timeout_ms: int = 25, consumer: str = CONSUMER,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self.timeout_ms = timeout_ms
        self.consumer = consumer
        self.health = BusHealth()
        self._clock = clock
        self._lock = threading.Lock()

    # --- calls on the ingest path ---------------------------------------------------

    def pending_shutdowns(self, task_id: str, limit: int) -> list[BusEvent]:
        """The task's shutdown events without this consumer's receipt, oldest first;
        empty when the bus is missing, failing or backing off (never raises)."""
        if not self._due():
            return []
        try:
            with self._open(write=False) as conn:
                rows = all_rows(conn, SELECT_PENDING, (task_id, SHUTDOWN, self.consumer, limit))
        except BusUnavailable as ex:
            self._failed(ex)
            return []
        self._succeeded()
        return [BusEvent(r[0], str(r[1]), _text(r[2]), r[3]) for r in rows]

    def acknowledge(self, event_id: int | str) -> bool:
        """Write this consumer's receipt for an event (once); False if the bus refused."""
        try:
            with self._open(write=True) as conn:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.execute(INSERT_RECEIPT, (self.consumer, event_id))
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
        except BusUnavailable as ex:
            self._failed(ex)
            return False
        with self._lock:
            self.health.acknowledged += 1
        self._succeeded()
        return True

    # --- status ---------------------------------------------------------------------

    def probe(self) -> dict[str, Any]:
        """A live check of the file for the status report (bounded by the busy
        timeout; it does not change the back-off)."""
        try:
            with self._open(write=False) as conn:
                pending = int(one(conn, COUNT_PENDING, (SHUTDOWN, self.consumer))[0])
        except BusUnavailable as ex:
            return {"state": ex.state, "detail": ex.detail, "pending_shutdowns": None}
        return {"state": "ok", "detail": None, "pending_shutdowns": pending}

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            h = self.health
            retry_in = max(0.0, h.retry_at - self._clock()) if h.failures else 0.0
            return {"state": h.state, "detail": h.detail, "last_ok_at": h.last_ok_at,
                    "last_error": h.last_error, "last_error_at": h.last_error_at,
                    "failures": h.failures, "retry_in_s": round(retry_in, 3),
                    "skipped": h.skipped, "acknowledged": h.acknowledged}

    # --- internals ------------------------------------------------------------------

    @contextmanager
    def _open(self, *, write: bool) -> Iterator[apsw.Connection]:
        try:
            present = self.path.is_file()
        except OSError as ex:
            raise BusUnavailable("unusable", f"cannot reach {self.path}: {ex}") from ex
        if not present:
            raise BusUnavailable("missing", f"no bus file at {self.path}")
        flags = apsw.SQLITE_OPEN_READWRITE if write else apsw.SQLITE_OPEN_READONLY
        conn: apsw.Connection | None = None
        try:
            conn = apsw.Connection(str(self.path), flags=flags)
            conn.set_busy_timeout(self.timeout_ms)
            yield conn
        except apsw.Error as ex:
            raise _classify(ex) from ex
        except (ValueError, TypeError) as ex:  # e.g. text that is not UTF-8
            raise BusUnavailable("unusable", f"{type(ex).__name__}: {ex}") from ex
        finally:
            if conn is not None:
                conn.close()

    def _due(self) -> bool:
        with self._lock:
            if self.health.failures and self._clock() < self.health.retry_at:
                self.health.skipped += 1
                return False
            return True

    def _succeeded(self) -> None:
        with self._lock:
            h = self.health
            h.state, h.detail, h.failures, h.retry_at = "ok", None, 0, 0.0
            h.last_ok_at = time.time()

    def _failed(self, ex: BusUnavailable) -> None:
        with self._lock:
            h = self.health
            h.state, h.detail = ex.state, ex.detail
            if ex.state == "missing":  # a stat per call is cheap: no back-off
                h.failures, h.retry_at = 0, 0.0
                return
            h.last_error, h.last_error_at = ex.detail, time.time()
            h.failures += 1
            h.retry_at = self._clock() + min(MAX_RETRY_S, RETRY_S * 2 ** (h.failures - 1))
