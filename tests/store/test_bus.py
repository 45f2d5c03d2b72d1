"""The coordination bus client (store.bus) against real bus files: pending events and
receipts, and every way the file can be unusable — missing, locked, corrupt, not a bus —
reported in its health without raising, with a back-off that doubles and clears."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from store.bus import CONSUMER, MAX_RETRY_S, RETRY_S, Bus
from tests.busfile import emit, make_bus, receipts


class Clock:
    """A monotonic clock the test moves by hand (back-offs without sleeping)."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    return tmp_path / "veritas-shared"


def bus_at(shared: Path, clock: Clock) -> Bus:
    return Bus(shared / "coordination.sqlite", timeout_ms=20, clock=clock)


@pytest.fixture
def locked(shared: Path) -> Iterator[apsw.Connection]:
    """Another program holding an exclusive lock on a rollback-journal bus."""
    path = make_bus(shared)
    emit(path, "s1")
    holder = apsw.Connection(str(path))
    holder.execute("BEGIN EXCLUSIVE")
    try:
        yield holder
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_pending_events_of_the_task_until_acknowledged(shared: Path, clock: Clock):
    path = make_bus(shared)
    first = emit(path, "s1", created_at="2026-11-30T06:00:00+00:00", reason="drift")
    emit(path, "s2")  # another task
    emit(path, "s1", "CLAEG_STATE_CHANGE")  # another kind of event
    second = emit(path, "s1", created_at="2026-11-30T07:00:00+00:00")
    bus = bus_at(shared, clock)

    found = bus.pending_shutdowns("s1", 20)
    assert [e.id for e in found] == [first, second]
    assert found[0].task_id == "s1" and found[0].created_at == "2026-11-30T06:00:00+00:00"
    assert '"reason": "drift"' in str(found[0].payload)
    assert bus.health.state == "ok" and bus.health.last_ok_at is not None

    assert bus.acknowledge(first) and bus.acknowledge(first)  # the second writes nothing
    assert receipts(path) == [(CONSUMER, first)]
    assert [e.id for e in bus.pending_shutdowns("s1", 20)] == [second]
    assert bus.pending_shutdowns("s1", 1)[0].id == second
    assert bus.probe() == {"state": "ok", "detail": None, "pending_shutdowns": 2}


def test_a_receipt_is_written_once_without_a_key_on_the_receipts_table(shared: Path,
                                                                       clock: Clock):
    path = make_bus(shared, receipts_key=False)
    event = emit(path, "s1")
    first, second = bus_at(shared, clock), bus_at(shared, clock)  # e.g. two processes
    assert first.acknowledge(event) and second.acknowledge(event)
    assert receipts(path) == [(CONSUMER, event)]
    assert first.pending_shutdowns("s1", 20) == []


def test_a_missing_bus_is_reported_and_not_backed_off(shared: Path, clock: Clock):
    bus = bus_at(shared, clock)
    assert bus.pending_shutdowns("s1", 20) == []
    assert bus.health.state == "missing" and bus.health.failures == 0
    assert bus.probe()["state"] == "missing"
    assert not bus.acknowledge(1)
    path = make_bus(shared)  # the bus appears: the next call uses it, no waiting
    event = emit(path, "s1")
    assert [e.id for e in bus.pending_shutdowns("s1", 20)] == [event]
    assert bus.health.state == "ok" and bus.health.skipped == 0


def test_a_locked_bus_is_reported_and_backed_off(shared: Path, clock: Clock,
                                                 locked: apsw.Connection):
    bus = bus_at(shared, clock)
    assert bus.pending_shutdowns("s1", 20) == []
    health = bus.snapshot()
    assert health["state"] == "locked" and "locked" in health["detail"]
    assert health["failures"] == 1 and health["retry_in_s"] == RETRY_S
    assert health["last_error"] and health["last_error_at"]

    # During the back-off the file is not touched at all.
    assert bus.pending_shutdowns("s1", 20) == [] and bus.health.skipped == 1
    assert bus.probe()["state"] == "locked"  # the status check still looks, live

    clock.now += RETRY_S
    assert bus.pending_shutdowns("s1", 20) == []  # tried again: still locked
    assert bus.health.failures == 2 and bus.snapshot()["retry_in_s"] == 2 * RETRY_S
    for _ in range(12):
        clock.now += MAX_RETRY_S
        bus.pending_shutdowns("s1", 20)
    assert bus.snapshot()["retry_in_s"] == MAX_RETRY_S  # capped

    locked.execute("ROLLBACK")
    locked.execute("BEGIN")  # the fixture's final rollback needs a transaction
    clock.now += MAX_RETRY_S
    assert len(bus.pending_shutdowns("s1", 20)) == 1
    assert bus.snapshot()["state"] == "ok" and bus.snapshot()["failures"] == 0


def test_a_receipt_refused_by_a_writer_is_reported(shared: Path, clock: Clock):
    path = make_bus(shared, wal=True)  # WAL: readers go on while another program writes
    event = emit(path, "s1")
    writer = apsw.Connection(str(path))
    writer.execute("BEGIN IMMEDIATE")
    bus = bus_at(shared, clock)
    try:
        assert [e.id for e in bus.pending_shutdowns("s1", 20)] == [event]
        assert not bus.acknowledge(event)
        assert bus.health.state == "locked" and bus.health.failures == 1
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    clock.now += RETRY_S
    assert bus.acknowledge(event) and receipts(path) == [(CONSUMER, event)]
    assert bus.snapshot()["acknowledged"] == 1


@pytest.mark.parametrize("content, state", [
    (b"this is not a database, just a file someone left here\n" * 100, "corrupt"),
    (b"SQLite format 3\x00" + b"\xff" * 4_000, "corrupt"),
])
def test_a_corrupt_bus_is_reported(shared: Path, clock: Clock, content: bytes, state: str):
    shared.mkdir()
    (shared / "coordination.sqlite").write_bytes(content)
    bus = bus_at(shared, clock)
    assert bus.pending_shutdowns("s1", 20) == []
    assert bus.health.state == state and bus.health.failures == 1
    assert not bus.acknowledge(1)
    probe = bus.probe()
    assert probe["state"] == state and probe["pending_shutdowns"] is None


def test_a_database_without_the_bus_tables_is_unusable(shared: Path, clock: Clock):
    shared.mkdir()
    conn = apsw.Connection(str(shared / "coordination.sqlite"))
    conn.execute("CREATE TABLE something_else(x)")
    conn.close()
    bus = bus_at(shared, clock)
    assert bus.pending_shutdowns("s1", 20) == []
    assert bus.health.state == "unusable" and "no such table: events" in str(bus.health.detail)


def test_the_bus_is_read_only_for_reads(shared: Path, clock: Clock):
    """Reading never creates or changes the bus file (it belongs to other programs)."""
    bus = bus_at(shared, clock)
    bus.pending_shutdowns("s1", 20)
    bus.probe()
    assert not shared.exists()
    path = make_bus(shared)
    emit(path, "s1")
    before = path.read_bytes()
    bus.pending_shutdowns("s1", 20)
    bus.probe()
    assert path.read_bytes() == before


# --- the index of unacknowledged events (incremental reads) ---------------------------


def test_events_added_later_are_found_by_the_incremental_read(shared: Path, clock: Clock):
    path = make_bus(shared)
    for i in range(50):
        emit(path, f"other-{i % 5}")
    bus = bus_at(shared, clock)
    assert bus.pending_shutdowns("s1", 20) == []  # the full scan
    late = emit(path, "s1")
    emit(path, "s1", "STENO_EXCHANGE")
    assert [e.id for e in bus.pending_shutdowns("s1", 20)] == [late]
    assert [e.id for e in bus.pending_shutdowns("s1", 20)] == [late]  # until acknowledged
    assert bus.acknowledge(late)
    assert bus.pending_shutdowns("s1", 20) == []


def test_a_receipt_written_by_another_process_drops_the_event(shared: Path, clock: Clock):
    path = make_bus(shared)
    event = emit(path, "s1")
    mine, other = bus_at(shared, clock), bus_at(shared, clock)
    assert [e.id for e in mine.pending_shutdowns("s1", 20)] == [event]
    assert other.acknowledge(event)
    assert mine.pending_shutdowns("s1", 20) == []


def test_a_replaced_or_shrunk_bus_is_scanned_again(shared: Path, clock: Clock):
    path = make_bus(shared)
    for _ in range(5):
        emit(path, "s1", created_at="2026-11-29T00:00:00Z")
    bus = bus_at(shared, clock)
    assert len(bus.pending_shutdowns("s1", 20)) == 5
    for _ in range(5):
        bus.acknowledge(bus.pending_shutdowns("s1", 1)[0].id)
    assert bus.pending_shutdowns("s1", 20) == []

    path.unlink()  # recreated by its owner: a new file whose ids start at 1 again
    fresh = emit(make_bus(shared), "s1", created_at="2026-11-30T00:00:00Z")
    assert fresh == 1
    assert [e.created_at for e in bus.pending_shutdowns("s1", 20)] == ["2026-11-30T00:00:00Z"]

    conn = apsw.Connection(str(path))  # emptied in place (same file): fewer rows than seen
    conn.execute("DELETE FROM receipts; DELETE FROM events")
    conn.close()
    emit(path, "s1", created_at="2026-12-01T00:00:00Z")
    assert [e.created_at for e in bus.pending_shutdowns("s1", 20)] == ["2026-12-01T00:00:00Z"]


def test_events_below_the_read_mark_are_found_by_the_periodic_scan(shared: Path,
                                                                    clock: Clock):
    """A writer that picks its own ids may add an event below the rows already read."""
    from store.bus import RESCAN_S

    path = make_bus(shared)
    emit(path, "s1", "NOISE")
    conn = apsw.Connection(str(path))
    conn.execute("INSERT INTO events(id, task_id, event_type, payload, created_at) "
                 "VALUES (100, 'x', 'NOISE', '{}', '2026-11-30')")
    bus = bus_at(shared, clock)
    assert bus.pending_shutdowns("s1", 20) == []
    conn.execute("INSERT INTO events(id, task_id, event_type, payload, created_at) VALUES "
                 "(50, 's1', 'CLAEG_TERMINAL_SHUTDOWN', '{}', '2026-11-30')")
    conn.close()
    assert bus.pending_shutdowns("s1", 20) == []  # below the mark: not read yet
    clock.now += RESCAN_S
    assert [e.id for e in bus.pending_shutdowns("s1", 20)] == [50]


def test_many_events_of_a_task_come_oldest_first_in_pages(shared: Path, clock: Clock):
    path = make_bus(shared)
    ids = [emit(path, "s1", created_at=f"2026-11-30T06:{59 - i:02d}:00Z") for i in range(30)]
    bus = bus_at(shared, clock)
    page = bus.pending_shutdowns("s1", 20)
    assert [e.id for e in page] == list(reversed(ids))[:20]  # by time, not by id
    for event in page:
        bus.acknowledge(event.id)
    assert [e.id for e in bus.pending_shutdowns("s1", 20)] == list(reversed(ids))[20:]


def test_the_health_counts_only_receipts_this_process_wrote(shared: Path, clock: Clock):
    path = make_bus(shared)
    event = emit(path, "s1")
    first, second = bus_at(shared, clock), bus_at(shared, clock)
    assert first.acknowledge(event) and second.acknowledge(event) and first.acknowledge(event)
    assert (first.snapshot()["acknowledged"], second.snapshot()["acknowledged"]) == (1, 0)
