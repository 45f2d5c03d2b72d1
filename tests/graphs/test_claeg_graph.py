"""CLAEG terminal-shutdown events through the compiled ingest graph, on
a real store file and a real bus file: each event of the session is recorded once as a
system turn marked milestone TERMINAL_SHUTDOWN and acknowledged with a receipt, across
restarts and when the receipt cannot be written; a missing, locked or corrupt bus never
fails an ingest and is reported in the status."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

from graphs.registry import build_graphs
from graphs.runner import Graphs
from nodes.context import RunContext
from nodes.extract.patterns import compile_patterns
from stenographer.settings import Settings
from store.bus import CONSUMER, RETRY_S, Bus
from store.db import Store
from store.errors import InvalidInput
from store.exchanges import turn_trace_sql
from tests.busfile import emit, make_bus, receipts
from tests.e2e.support import INGEST_LINE, SHUTDOWN


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def graphs() -> Graphs:
    return build_graphs()


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    return tmp_path / "veritas-shared"


@pytest.fixture
def clock() -> Clock:
    return Clock()


class Process:
    """What one server process holds: a store connection set and a bus client."""

    def __init__(self, tmp_path: Path, shared: Path, clock: Clock, turn_limit: int = 50):
        self.settings = Settings(data_dir=tmp_path / "data", shared_dir=shared,
                                 turn_limit=turn_limit, bus_timeout_ms=20)
        self.store = Store(self.settings.db_path, vector_dim=self.settings.vector_dim)
        assert self.settings.bus_path is not None
        self.bus = Bus(self.settings.bus_path, timeout_ms=20, clock=clock)
        self.ctx = RunContext(store=self.store, settings=self.settings,
                              patterns=compile_patterns(), bus=self.bus)

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self.store.read() as conn:
            return [tuple(r) for r in conn.execute(sql, params)]

    def system_turns(self, session: str = "s") -> list[tuple[Any, ...]]:
        return self.rows(f"SELECT e.id, e.content, e.source_key, {turn_trace_sql('e', 's')}, "
                         "m.label "
                         "FROM exchanges e JOIN sessions s ON s.id = e.session_id "
                         "LEFT JOIN milestones m ON m.exchange_id = e.id "
                         "WHERE s.name = ? AND e.role = 'system' ORDER BY e.id", (session,))


@pytest.fixture
def process(tmp_path: Path, shared: Path, clock: Clock) -> Iterator[Process]:
    p = Process(tmp_path, shared, clock)
    try:
        yield p
    finally:
        p.store.close()


def ingest(graphs: Graphs, p: Process, content: str = "next step", session: str = "s",
           **extra: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    out, trace = graphs.run("ingest", {"request": {"role": "user", "content": content,
                                                   "session_id": session, **extra}}, p.ctx)
    reply: dict[str, Any] = out["reply"]
    assert INGEST_LINE.fullmatch(reply["text"]), reply["text"]
    return reply, trace


def status(graphs: Graphs, p: Process) -> dict[str, Any]:
    reply = graphs.run("status", {"request": {}}, p.ctx)[0]["reply"]
    assert reply["text"].count(" | bus: ") == 1
    bus: dict[str, Any] = reply["status"]["bus"]
    bus["text"] = reply["text"]
    return bus


def test_a_shutdown_event_is_recorded_once_as_a_milestone_system_turn(
        graphs: Graphs, process: Process, shared: Path):
    path = make_bus(shared)
    event = emit(path, "s", source="omega-brain", created_at="2026-11-30T06:00:00+00:00",
                 reason="drift budget exhausted")
    emit(path, "other-session")
    emit(path, "s", "STENO_EXCHANGE")

    reply, trace = ingest(graphs, process, "Deploying the canary now.")
    (turn_id, content, key, trace_id, label), = process.system_turns()
    assert label == "TERMINAL_SHUTDOWN from omega-brain at 2026-11-30T06:00:00Z"
    assert "terminal shutdown from omega-brain" in content and "drift budget" in content
    assert key.startswith(f"claeg:{event}:") and trace_id == reply["trace_id"]
    assert turn_id < reply["exchange_id"]  # the bus had it before this turn arrived
    assert reply["shutdowns"] == [{"exchange_id": turn_id, "event_id": event,
                                   "source": "omega-brain", "at": "2026-11-30T06:00:00Z",
                                   "new": True, "acknowledged": True}]
    clause = SHUTDOWN.search(reply["text"])
    assert clause is not None and clause["id"] == str(turn_id)
    assert reply["text"].endswith(" | CLAEG terminal shutdown from omega-brain at "
                                  f"2026-11-30T06:00:00Z → #{turn_id} (milestone)")
    assert receipts(path) == [(CONSUMER, event)]
    nodes = [s["node"] for s in trace["stages"]]
    # the bus is read once (bus_pending); the claeg subgraph takes its events in turn
    assert nodes[:4] == ["validate", "bus_pending", "bus_event", "bus_redact"]
    assert nodes.count("bus_receipt") == 1 and nodes.count("bus_event") == 2

    again, _ = ingest(graphs, process)
    assert again["shutdowns"] == [] and SHUTDOWN.search(again["text"]) is None
    assert len(process.system_turns()) == 1
    assert process.system_turns("other-session") == []  # read only for its own session

    # Indexed like any other turn, listed with the milestones of the running notes.
    out, _ = graphs.run("search", {"request": {"query": "terminal shutdown drift budget",
                                               "session_id": "s", "mode": "keyword",
                                               "limit": 5}}, process.ctx)
    assert out["hits"][0]["exchange_id"] == turn_id
    notes, _ = graphs.run("notes", {"request": {"session_id": "s"}}, process.ctx)
    milestones = notes["reply"]["markdown"].split("## Milestones")[1].split("##")[0]
    assert f"#{turn_id} **TERMINAL_SHUTDOWN from omega-brain" in milestones

    bus = status(graphs, process)
    assert bus["state"] == "ok" and bus["pending_shutdowns"] == 1  # other-session's
    assert bus["recorded_shutdowns"] == 1 and bus["process"]["acknowledged"] == 1
    assert "bus: ok at" in bus["text"] and "1 recorded" in bus["text"]


def test_exactly_once_across_restarts(graphs: Graphs, tmp_path: Path, shared: Path,
                                      clock: Clock):
    path = make_bus(shared)
    first_event = emit(path, "s")
    before = Process(tmp_path, shared, clock)
    reply, _ = ingest(graphs, before)
    assert [s["event_id"] for s in reply["shutdowns"]] == [first_event]
    before.store.close()

    after = Process(tmp_path, shared, clock)  # a restarted server: new connections, new bus
    try:
        reply, _ = ingest(graphs, after)
        assert reply["shutdowns"] == []
        second_event = emit(path, "s", source="sswp", created_at="2026-11-30T07:00:00Z")
        reply, _ = ingest(graphs, after)
        assert [(s["event_id"], s["source"]) for s in reply["shutdowns"]] == [
            (second_event, "sswp")]
        assert len(after.system_turns()) == 2
        assert receipts(path) == [(CONSUMER, first_event), (CONSUMER, second_event)]
    finally:
        after.store.close()


def test_exactly_once_when_the_receipt_cannot_be_written(graphs: Graphs, tmp_path: Path,
                                                         shared: Path, clock: Clock):
    """The turn is stored, then the bus refuses the receipt (another program is writing
    to it): later ingests, in this process or after a restart, write the receipt and do
    not store the turn again."""
    path = make_bus(shared, wal=True)  # WAL: the event can be read while a writer works
    event = emit(path, "s")
    p = Process(tmp_path, shared, clock)
    writer = apsw.Connection(str(path))
    writer.execute("BEGIN IMMEDIATE")
    try:
        reply, _ = ingest(graphs, p)
        assert [(s["new"], s["acknowledged"]) for s in reply["shutdowns"]] == [(True, False)]
        assert SHUTDOWN.search(reply["text"]) is not None  # recorded: the reply says so
        assert receipts(path) == [] and len(p.system_turns()) == 1
        assert status(graphs, p)["process"]["state"] == "locked"

        reply, _ = ingest(graphs, p)  # backing off: the bus is not even read
        assert reply["shutdowns"] == [] and p.bus.health.skipped == 1
    finally:
        writer.execute("ROLLBACK")
        writer.close()

    clock.now += RETRY_S
    reply, _ = ingest(graphs, p)
    assert [(s["new"], s["acknowledged"]) for s in reply["shutdowns"]] == [(False, True)]
    assert SHUTDOWN.search(reply["text"]) is None  # nothing new was recorded
    assert receipts(path) == [(CONSUMER, event)] and len(p.system_turns()) == 1
    p.store.close()

    restarted = Process(tmp_path, shared, clock)
    try:
        reply, _ = ingest(graphs, restarted)
        assert reply["shutdowns"] == [] and len(restarted.system_turns()) == 1
    finally:
        restarted.store.close()


def test_the_receipt_is_retried_after_a_restart_too(graphs: Graphs, tmp_path: Path,
                                                    shared: Path, clock: Clock):
    path = make_bus(shared, wal=True)
    event = emit(path, "s")
    p = Process(tmp_path, shared, clock)
    writer = apsw.Connection(str(path))
    writer.execute("BEGIN IMMEDIATE")
    try:
        reply, _ = ingest(graphs, p)
        assert reply["shutdowns"][0]["acknowledged"] is False
    finally:
        writer.execute("ROLLBACK")
        writer.close()
        p.store.close()
    restarted = Process(tmp_path, shared, Clock())
    try:
        reply, _ = ingest(graphs, restarted)
        assert [(s["new"], s["acknowledged"]) for s in reply["shutdowns"]] == [(False, True)]
        assert receipts(path) == [(CONSUMER, event)] and len(restarted.system_turns()) == 1
    finally:
        restarted.store.close()


def hold_lock(path: Path) -> apsw.Connection:
    holder = apsw.Connection(str(path))
    holder.execute("BEGIN EXCLUSIVE")
    return holder


@pytest.mark.parametrize("kind", ["missing", "locked", "corrupt", "unusable"])
def test_an_unusable_bus_never_fails_an_ingest(graphs: Graphs, process: Process,
                                               shared: Path, clock: Clock, kind: str):
    holder = None
    if kind == "locked":
        path = make_bus(shared)
        emit(path, "s")
        holder = hold_lock(path)
    elif kind == "corrupt":
        shared.mkdir()
        (shared / "coordination.sqlite").write_bytes(b"\x00garbage" * 512)
    elif kind == "unusable":
        shared.mkdir()
        apsw.Connection(str(shared / "coordination.sqlite")).execute("CREATE TABLE t(x)")
    try:
        for i in range(3):
            reply, _ = ingest(graphs, process, f"turn {i} while the bus is {kind}")
            assert reply["shutdowns"] == []
        bus = status(graphs, process)
        assert bus["state"] == kind and bus["process"]["state"] == kind
        assert process.rows("SELECT count(*) FROM exchanges") == [(3,)]
        if kind == "missing":
            assert f"bus: none at {shared / 'coordination.sqlite'}; publishing: " in bus["text"]
            assert bus["process"]["failures"] == 0
        else:
            assert f"bus: {kind} at" in bus["text"] and "ingest goes on" in bus["text"]
            assert bus["process"]["failures"] == 1 and bus["process"]["skipped"] == 2
    finally:
        if holder is not None:
            holder.execute("ROLLBACK")
            holder.close()
    if kind == "locked":  # released: the next ingest after the back-off records the event
        clock.now += RETRY_S
        reply, _ = ingest(graphs, process)
        assert len(reply["shutdowns"]) == 1 and status(graphs, process)["state"] == "ok"


def test_a_rejected_ingest_reads_nothing_from_the_bus(graphs: Graphs, process: Process,
                                                      shared: Path):
    path = make_bus(shared)
    emit(path, "s")
    with pytest.raises(InvalidInput):
        graphs.run("ingest", {"request": {"role": "robot", "content": "x", "session_id": "s"}},
                   process.ctx)
    assert process.rows("SELECT count(*) FROM exchanges") == [(0,)] and receipts(path) == []


def test_the_shutdown_turn_is_compressed_into_a_tier_a_brief(graphs: Graphs, tmp_path: Path,
                                                             shared: Path, clock: Clock):
    path = make_bus(shared)
    emit(path, "s")
    p = Process(tmp_path, shared, clock, turn_limit=3)
    try:
        ingest(graphs, p, "plain note one")
        reply, _ = ingest(graphs, p, "plain note two")
        (turn_id, *_), = p.system_turns()
        assert [b["tier"] for b in reply["compressed"]] == ["A"]
        assert p.rows("SELECT brief_id IS NOT NULL FROM exchanges WHERE id = ?",
                      (turn_id,)) == [(1,)]
    finally:
        p.store.close()


def test_without_a_bus_nothing_is_read(graphs: Graphs, tmp_path: Path, shared: Path):
    path = make_bus(shared)
    emit(path, "s")
    settings = Settings(data_dir=tmp_path / "data", shared_dir=None)
    store = Store(settings.db_path)
    try:
        ctx = RunContext(store=store, settings=settings, patterns=compile_patterns())
        out, _ = graphs.run("ingest", {"request": {"role": "user", "content": "hi",
                                                   "session_id": "s"}}, ctx)
        assert out["reply"]["shutdowns"] == [] and receipts(path) == []
        out, _ = graphs.run("status", {"request": {}}, ctx)
        assert out["reply"]["status"]["bus"]["state"] == "off"
        assert out["reply"]["text"].endswith("bus: off (VERITAS_SHARED_DIR=off)")
    finally:
        store.close()
