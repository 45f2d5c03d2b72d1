"""The coordination bus shared by the Omega/VERITAS tools.

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

The bus holds every tool's events and has no index on ``task_id`` (it is not ours to
add one): a scan of 20,000 events takes ~8 ms, too much for every ingest. So a process
keeps an index of the shutdown events it has not seen acknowledged, by task, and reads
only the events added since (a rowid range); a full scan runs at the first call, when
the file was replaced or shrank, and once a minute (writers that choose their own ids).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw

from store.backoff import backoff
from store.sql import all_rows, one

__all__ = ["CONSUMER", "PUBLISHED", "SHUTDOWN", "Bus", "BusEvent", "BusHealth",
           "OutgoingEvent"]

CONSUMER = "omega-stenographer"
SHUTDOWN = "CLAEG_TERMINAL_SHUTDOWN"
PUBLISHED = "STENO_EXCHANGE"  # the turns this store publishes (store.bus_outbox)
RETRY_S, MAX_RETRY_S = 1.0, 60.0
RESCAN_S = 60.0
MAX_ASKED = 200  # rowids per read of a task's events

SELECT_TOP = "SELECT max(rowid) FROM events"
SELECT_UNACKNOWLEDGED = """
SELECT e.rowid, e.task_id FROM events e
WHERE e.rowid > ?1 AND e.event_type = ?2
  AND NOT EXISTS (SELECT 1 FROM receipts r WHERE r.consumer = ?3 AND r.event_id = e.id)"""
# {rowids} is a list of integer placeholders (?4, ?5, ...) built by _events_sql.
SELECT_EVENTS = """
SELECT e.rowid, e.id, e.task_id, e.payload, e.created_at FROM events e
WHERE e.rowid IN ({rowids}) AND e.task_id = ?1 AND e.event_type = ?2
  AND NOT EXISTS (SELECT 1 FROM receipts r WHERE r.consumer = ?3 AND r.event_id = e.id)
ORDER BY e.created_at, e.rowid"""
COUNT_PENDING = """
SELECT count(*) FROM events e WHERE e.event_type = ?1
  AND NOT EXISTS (SELECT 1 FROM receipts r WHERE r.consumer = ?2 AND r.event_id = e.id)"""
# Whatever the bus's own constraints, a receipt is written once: the check and the insert
# run in one BEGIN IMMEDIATE transaction, which serialises every writer of the file.
INSERT_RECEIPT = """
INSERT INTO receipts(consumer, event_id) SELECT ?1, ?2
WHERE NOT EXISTS (SELECT 1 FROM receipts WHERE consumer = ?1 AND event_id = ?2)"""
# Published turns: the bus is not ours, so no unique index can guard them. The keys of a
# batch already on the bus are read and only the others inserted, in one BEGIN IMMEDIATE
# transaction (it serialises every writer of the file, so two publishers of one store
# cannot both insert a key). Other tools' payloads need not be JSON: json_valid first.
SELECT_PUBLISHED_KEYS = """
SELECT CASE WHEN json_valid(payload) THEN json_extract(payload, '$.key') END FROM events
WHERE event_type = ?1 AND CASE WHEN json_valid(payload) THEN
  json_extract(payload, '$.store_id') = ?2
  AND json_extract(payload, '$.exchange_id') BETWEEN ?3 AND ?4 ELSE 0 END"""
INSERT_EVENT = """
INSERT INTO events(task_id, event_type, payload, created_at) VALUES (?1, ?2, ?3, ?4)"""


@dataclass(frozen=True)
class BusEvent:
    rowid: int
    id: int | str  # as the bus stores it; receipts name it the same way
    task_id: str
    payload: str | None
    created_at: Any  # ISO text or epoch seconds, as the writer chose


@dataclass(frozen=True)
class OutgoingEvent:
    """A turn to publish: ``key`` is unique across stores (store id, exchange id, chain
    hash) and is also the payload's ``key``."""

    key: str
    store_id: str
    exchange_id: int
    task_id: str
    payload: str  # JSON
    created_at: str  # ISO 8601


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
    acknowledged: int = 0  # receipts written by this process (not those found written)
    published: int = 0  # events inserted by this process (not those found there)


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


def _identity(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _events_sql(count: int) -> str:
    return SELECT_EVENTS.format(rowids=", ".join(f"?{i}" for i in range(4, 4 + count)))


@dataclass
class _Index:
    """Shutdown events not seen acknowledged, by task (rowids), up to rowid ``scanned``."""

    identity: tuple[int, int] | None = None  # (st_dev, st_ino) of the file scanned
    scanned: int = -1  # -1: never scanned
    full_at: float = 0.0  # monotonic time of the last full scan
    waiting: dict[str, set[int]] | None = None


class Bus:
    """The coordination bus file and this process's health record. Thread-safe."""

    def __init__(self, path: Path, *, timeout_ms: int = 25, consumer: str = CONSUMER,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self.timeout_ms = timeout_ms
        self.consumer = consumer
        self.health = BusHealth()
        self._clock = clock
        self._lock = threading.Lock()  # health
        self._poll_lock = threading.Lock()  # the index; one poll at a time
        self._index = _Index()

    # --- calls on the ingest path ---------------------------------------------------

    def pending_shutdowns(self, task_id: str, limit: int) -> list[BusEvent]:
        """The task's shutdown events without this consumer's receipt, oldest first;
        empty when the bus is missing, failing or backing off (never raises)."""
        if not self._due():
            return []
        with self._poll_lock:
            try:
                # most machines have no bus: told by a stat, without trying to open it
                if not self._present():
                    self._failed(BusUnavailable("missing", f"no bus file at {self.path}"))
                    return []
                with self._open(write=False, present=True) as conn:
                    conn.execute("BEGIN")  # one snapshot for the scan and the reads
                    try:
                        found = self._read_pending(conn, task_id, limit)
                    finally:
                        conn.execute("COMMIT")
            except BusUnavailable as ex:
                self._failed(ex)
                return []
        self._succeeded()
        return found

    def _read_pending(self, conn: apsw.Connection, task_id: str, limit: int
                      ) -> list[BusEvent]:
        index, now = self._index, self._clock()
        top = int(one(conn, SELECT_TOP)[0] or 0)
        identity = _identity(self.path)
        if (index.waiting is None or identity != index.identity or top < index.scanned
                or now - index.full_at >= RESCAN_S):
            index.identity, index.scanned, index.full_at, index.waiting = identity, 0, now, {}
        assert index.waiting is not None
        for rowid, task in all_rows(conn, SELECT_UNACKNOWLEDGED,
                                    (index.scanned, SHUTDOWN, self.consumer)):
            index.waiting.setdefault(str(task), set()).add(int(rowid))
        index.scanned = max(index.scanned, top)
        mine = sorted(index.waiting.get(task_id, ()))
        if not mine:
            return []
        asked, later = mine[:MAX_ASKED], mine[MAX_ASKED:]
        rows = all_rows(conn, _events_sql(len(asked)),
                        (task_id, SHUTDOWN, self.consumer, *asked))
        # Those still without a receipt stay (it is written by a later node, or fails).
        waiting = {int(r[0]) for r in rows} | set(later)
        if waiting:
            index.waiting[task_id] = waiting
        else:
            del index.waiting[task_id]
        return [BusEvent(int(r[0]), r[1], str(r[2]), _text(r[3]), r[4]) for r in rows[:limit]]

    def acknowledge(self, event_id: int | str) -> bool:
        """Write this consumer's receipt for an event (once); False if the bus refused."""
        try:
            with self._open(write=True) as conn:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.execute(INSERT_RECEIPT, (self.consumer, event_id))
                    written = conn.changes()
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
        except BusUnavailable as ex:
            self._failed(ex)
            return False
        with self._lock:
            self.health.acknowledged += written
        self._succeeded()
        return True

    # --- publishing (the background deliverer, not the ingest path) -------------------

    def publish(self, events: list[OutgoingEvent], timeout_ms: int) -> tuple[int, int]:
        """Insert the events whose key is not on the bus yet, in one transaction;
        returns (inserted, already there). Raises BusUnavailable when the bus is
        missing, locked, corrupt or refuses the rows; the publisher records that on its
        cursor and backs off on its own, so it never changes the ingest path's back-off
        (``health``)."""
        if not events:
            return 0, 0
        stores = {e.store_id for e in events}
        if len(stores) != 1:
            raise ValueError("a batch holds the turns of one store")
        ids = [e.exchange_id for e in events]
        with self._open(write=True, timeout_ms=timeout_ms) as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                there = {str(r[0]) for r in all_rows(
                    conn, SELECT_PUBLISHED_KEYS,
                    (PUBLISHED, stores.pop(), min(ids), max(ids))) if r[0] is not None}
                fresh = [e for e in events if e.key not in there]
                conn.executemany(INSERT_EVENT, [
                    (e.task_id, PUBLISHED, e.payload, e.created_at) for e in fresh])
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            # A failed COMMIT (busy) leaves the transaction open: closing rolls it back.
            conn.execute("COMMIT")
        with self._lock:
            self.health.published += len(fresh)
        return len(fresh), len(events) - len(fresh)

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
                    "skipped": h.skipped, "acknowledged": h.acknowledged,
                    "published": h.published}

    # --- internals ------------------------------------------------------------------

    def _present(self) -> bool:
        """Whether the bus file is there (one ``stat``)."""
        try:
            return self.path.is_file()
        except OSError as ex:
            raise BusUnavailable("unusable", f"cannot reach {self.path}: {ex}") from ex

    @contextmanager
    def _open(self, *, write: bool, timeout_ms: int | None = None, present: bool = False
              ) -> Iterator[apsw.Connection]:
        """A connection to the bus file (``present``: the caller has just seen it there)."""
        if not (present or self._present()):
            raise BusUnavailable("missing", f"no bus file at {self.path}")
        flags = apsw.SQLITE_OPEN_READWRITE if write else apsw.SQLITE_OPEN_READONLY
        conn: apsw.Connection | None = None
        try:
            conn = apsw.Connection(str(self.path), flags=flags)
            conn.set_busy_timeout(self.timeout_ms if timeout_ms is None else timeout_ms)
            yield conn
        except apsw.Error as ex:
            raise _classify(ex) from ex
        except OSError as ex:  # e.g. the file went away between two calls
            raise BusUnavailable("unusable", f"cannot read {self.path}: {ex}") from ex
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
            h.retry_at = self._clock() + backoff(h.failures, first_s=RETRY_S, cap_s=MAX_RETRY_S)
