"""Publishing turns to the coordination bus through the compiled
``bus_publish`` graph, on real store files and a real bus file (tests/busfile.py): every
turn arrives once as a STENO_EXCHANGE event — across restarts, when the cursor lags
behind the bus (a crash between the bus commit and the cursor), with two publishers on
one store, after the bus was locked or corrupt for a while — with keys that stay unique
when the store is recreated; the outbox's progress and errors show in the status while
ingest goes on."""

from __future__ import annotations

import json
import shutil
import threading
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
from store.bus import Bus
from store.db import Store
from store.errors import InvalidInput
from tests.busfile import emit, make_bus


@pytest.fixture(scope="module")
def graphs() -> Graphs:
    return build_graphs()


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    return tmp_path / "veritas-shared"


class Process:
    """What one server process holds: a store connection set and a bus client."""

    def __init__(self, data: Path, shared: Path | None, excerpt: int = 4_000) -> None:
        self.settings = Settings(data_dir=data, shared_dir=shared, bus_timeout_ms=20,
                                 bus_publish_timeout_ms=50, bus_excerpt_chars=excerpt)
        self.store = Store(self.settings.db_path, vector_dim=self.settings.vector_dim)
        path = self.settings.bus_path
        self.bus = None if path is None else Bus(path, timeout_ms=20)
        self.ctx = RunContext(store=self.store, settings=self.settings,
                              patterns=compile_patterns(), bus=self.bus)

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self.store.read() as conn:
            return [tuple(r) for r in conn.execute(sql, params)]


@pytest.fixture
def process(tmp_path: Path, shared: Path) -> Iterator[Process]:
    p = Process(tmp_path / "data", shared)
    try:
        yield p
    finally:
        p.store.close()


def ingest(graphs: Graphs, p: Process, content: str, session: str = "s",
           **extra: Any) -> dict[str, Any]:
    out, _ = graphs.run("ingest", {"request": {"role": "user", "content": content,
                                               "session_id": session, **extra}}, p.ctx)
    return dict(out["reply"])


def publish(graphs: Graphs, p: Process, batch: int = 200) -> dict[str, Any]:
    out, _ = graphs.run("bus_publish", {"request": {"batch": batch}}, p.ctx)
    return dict(out["reply"])


def drain(graphs: Graphs, p: Process, batch: int = 200) -> list[dict[str, Any]]:
    """One run publishes batch after batch until the outbox is drained."""
    return [publish(graphs, p, batch)]


def events(path: Path) -> list[tuple[str, dict[str, Any], str]]:
    """(task_id, payload, created_at) of the STENO_EXCHANGE events, in bus order."""
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    conn.set_busy_timeout(5_000)
    try:
        return [(str(r[0]), json.loads(r[1]), str(r[2])) for r in conn.execute(
            "SELECT task_id, payload, created_at FROM events "
            "WHERE event_type = 'STENO_EXCHANGE' ORDER BY id")]
    finally:
        conn.close()


def keys(path: Path) -> list[str]:
    return [payload["key"] for _, payload, _ in events(path)]


def status(graphs: Graphs, p: Process) -> tuple[dict[str, Any], str]:
    out, _ = graphs.run("status", {"request": {}}, p.ctx)
    return dict(out["reply"]["status"]), str(out["reply"]["text"])


def test_new_turns_are_published_once_each_with_their_payload(graphs: Graphs,
                                                              process: Process, shared: Path):
    path = make_bus(shared)
    emit(path, "s", "OTHER_TOOL_EVENT")  # other tools' events stay untouched
    first = ingest(graphs, process, "We decided to use Postgres for the ledger.",
                   trace_id="VT-20261130-1a2b3c4d")
    ingest(graphs, process, "Blocked on the staging credentials.", session="t")
    ingest(graphs, process, "x" * 5_000)

    reply = publish(graphs, process)
    assert reply["ok"] and reply["published"] == 3 and reply["duplicates"] == 0
    assert reply["through"] == 3 and reply["cursor"]["kind"] == "outbox:bus"
    assert reply["lines"] == [f"Published turns #1-#3 to {path}: 3 new events, 0 already there"]
    assert reply["batches"] == 1 and reply["text"].startswith(f"Published to {path}: 1 batch,")
    found = events(path)
    assert [task for task, _, _ in found] == ["s", "t", "s"]
    _, payload, created_at = found[0]
    store_id = process.rows("SELECT value FROM meta WHERE key = 'store_id'")[0][0]
    chain, content_hash = process.rows(
        "SELECT chain_hash, content_hash FROM exchanges WHERE id = ?",
        (first["exchange_id"],))[0]
    assert payload["key"] == f"{store_id}:{first['exchange_id']}:{bytes(chain).hex()}"
    assert payload["store_id"] == store_id and len(store_id) == 32
    assert payload["exchange_id"] == first["exchange_id"] and payload["session"] == "s"
    assert payload["role"] == "user" and payload["trace_id"] == "VT-20261130-1a2b3c4d"
    assert payload["content_hash"] == bytes(content_hash).hex()
    assert payload["chain_hash"] == payload["origin"] == bytes(chain).hex()
    assert payload["decisions"] and "Postgres" in payload["decisions"][0]
    assert payload["blockers"] == [] and payload["source"] == "omega-stenographer"
    assert payload["excerpt"] == "We decided to use Postgres for the ledger."
    assert payload["truncated"] is False and created_at == payload["created_at"]
    assert created_at.endswith("Z")
    assert found[1][1]["blockers"] and "staging credentials" in found[1][1]["blockers"][0]
    long = found[2][1]
    assert long["truncated"] is True and long["content_chars"] == 5_000
    assert long["excerpt"] == "x" * 4_000

    again = publish(graphs, process)
    assert again["ok"] and again["through"] is None and again["batches"] == 0
    assert len(events(path)) == 3


def test_a_cursor_behind_the_bus_publishes_nothing_twice(graphs: Graphs, process: Process,
                                                         shared: Path):
    """A publisher killed after the bus committed and before the cursor moved sends the
    batch again: every key is found on the bus, nothing is inserted."""
    path = make_bus(shared)
    for i in range(5):
        ingest(graphs, process, f"turn {i}")
    assert drain(graphs, process, batch=2)[-1]["ok"]
    with process.store.write() as conn:
        conn.execute("UPDATE cursors SET position = 1 WHERE kind = 'outbox:bus'")
    reply = publish(graphs, process, batch=3)
    assert (reply["batches"], reply["published"], reply["duplicates"]) == (2, 0, 4)
    assert len(keys(path)) == len(set(keys(path))) == 5


def test_published_once_across_restarts(graphs: Graphs, tmp_path: Path, shared: Path):
    path = make_bus(shared)
    before = Process(tmp_path / "data", shared)
    ingest(graphs, before, "before the restart")
    assert publish(graphs, before)["published"] == 1
    ingest(graphs, before, "stored, not yet published")
    before.store.close()

    after = Process(tmp_path / "data", shared)  # a restarted server
    try:
        ingest(graphs, after, "after the restart")
        replies = drain(graphs, after)
        assert sum(r["published"] for r in replies) == 2
        assert [p["excerpt"] for _, p, _ in events(path)] == [
            "before the restart", "stored, not yet published", "after the restart"]
        assert len(set(keys(path))) == 3
    finally:
        after.store.close()


def test_keys_stay_unique_when_the_store_is_recreated(graphs: Graphs, tmp_path: Path,
                                                      shared: Path):
    path = make_bus(shared)
    old = Process(tmp_path / "data", shared)
    ingest(graphs, old, "first life")
    drain(graphs, old)
    old.store.close()
    shutil.rmtree(tmp_path / "data")

    new = Process(tmp_path / "data", shared)  # exchange ids start again at 1
    try:
        reply = ingest(graphs, new, "second life")
        assert reply["exchange_id"] == 1
        assert sum(r["published"] for r in drain(graphs, new)) == 1
    finally:
        new.store.close()
    found = events(path)
    assert [p["exchange_id"] for _, p, _ in found] == [1, 1]
    assert len({p["store_id"] for _, p, _ in found}) == 2 and len(set(keys(path))) == 2


def test_two_publishers_on_one_store_publish_each_turn_once(graphs: Graphs, tmp_path: Path,
                                                            shared: Path):
    path = make_bus(shared)
    first, second = Process(tmp_path / "data", shared), Process(tmp_path / "data", shared)
    for p in (first, second):
        p.settings = Settings(data_dir=tmp_path / "data", shared_dir=shared,
                              bus_publish_timeout_ms=5_000)
        p.ctx = RunContext(store=p.store, settings=p.settings, patterns=compile_patterns(),
                           bus=p.bus)
    errors: list[BaseException] = []

    def work(p: Process, who: int) -> None:
        try:
            for i in range(30):
                ingest(graphs, p, f"publisher {who} turn {i}")
                publish(graphs, p, batch=4)
            drain(graphs, p, batch=7)
        except BaseException as ex:  # pragma: no cover - reported below
            errors.append(ex)

    threads = [threading.Thread(target=work, args=(p, i)) for i, p in enumerate((first,
                                                                                  second))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors
        published = keys(path)
        assert len(published) == len(set(published)) == 60
        assert sorted(p["exchange_id"] for _, p, _ in events(path)) == list(range(1, 61))
        state, _ = status(graphs, first)
        assert state["bus"]["publishing"]["pending"] == 0
        assert state["bus"]["publishing"]["position"] == 60
    finally:
        first.store.close()
        second.store.close()


def hold_lock(path: Path) -> apsw.Connection:
    holder = apsw.Connection(str(path))
    holder.execute("BEGIN EXCLUSIVE")  # rollback journal: readers are locked out too
    return holder


@pytest.mark.parametrize("kind", ["locked", "corrupt", "missing"])
def test_an_unusable_bus_keeps_the_turns_until_it_is_back(graphs: Graphs, process: Process,
                                                          shared: Path, kind: str):
    path = shared / "coordination.sqlite"
    holder = None
    if kind == "locked":
        make_bus(shared)
        holder = hold_lock(path)
    elif kind == "corrupt":
        shared.mkdir()
        path.write_bytes(b"\x00garbage" * 512)
    try:
        for i in range(3):
            turn = ingest(graphs, process, f"turn {i} while the bus is {kind}")
            assert turn["exchange_id"] == i + 1
        reply = publish(graphs, process)
        assert not reply["ok"] and reply["retryable"] and f"the bus is {kind}" in reply["text"]
        state, text = status(graphs, process)
        bus = state["bus"]
        assert bus["state"] == kind and process.rows("SELECT count(*) FROM exchanges") == [(3,)]
        publishing = bus["publishing"]
        assert publishing["pending"] == 3 and publishing["delivered"] == 0
        assert publishing["last_success_at"] is None
        assert f"the bus is {kind}" in publishing["last_error"]
        assert "; publishing: 0 delivered, 3 pending, last error " in text
        # Next to the sync lines too: the cursor is an outbox like a peer's.
        (line,) = [p for p in state["delivery"]["peers"] if p["destination"] == "bus"]
        assert line["pending"] == 3 and line["peer"] == str(path)
        # The ingest path's back-off is its own: the failed publish did not add to it
        # (the first ingest failed, the two after it skipped the bus).
        assert process.bus is not None
        health = process.bus.health
        assert (health.failures, health.skipped) == ((0, 0) if kind == "missing" else (1, 2))
    finally:
        if holder is not None:
            holder.execute("ROLLBACK")
            holder.close()
    if kind != "locked":
        path.unlink(missing_ok=True)
        make_bus(shared)
    ingest(graphs, process, "the bus is back")
    replies = drain(graphs, process)
    assert replies[-1]["ok"] and sum(r["published"] for r in replies) == 4
    assert len(set(keys(path))) == 4
    state, text = status(graphs, process)
    publishing = state["bus"]["publishing"]
    assert publishing["pending"] == 0 and publishing["delivered"] == 4
    assert publishing["last_success_at"] is not None and publishing["last_error"] is not None
    assert "; publishing: 4 delivered, 0 pending, last success " in text


def test_forgotten_turns_are_not_published(graphs: Graphs, process: Process, shared: Path):
    path = make_bus(shared)
    ingest(graphs, process, "keep this")
    ingest(graphs, process, "the password is hunter2-zebra")
    graphs.run("forget", {"request": {"exchange_ids": [2], "confirm": True,
                                               "reason": "test"}}, process.ctx)
    ingest(graphs, process, "keep this too")
    reply = publish(graphs, process)
    assert reply["published"] == 2 and reply["through"] == 3
    assert "1 forgotten turn passed over" in reply["lines"][0]
    assert [p["excerpt"] for _, p, _ in events(path)] == ["keep this", "keep this too"]


def test_foreign_payloads_that_are_not_json_do_not_stop_publishing(
        graphs: Graphs, process: Process, shared: Path):
    path = make_bus(shared)
    conn = apsw.Connection(str(path))
    conn.execute("INSERT INTO events(task_id, event_type, payload, created_at) "
                 "VALUES ('s', 'STENO_EXCHANGE', 'not json {', 'now')")
    conn.close()
    ingest(graphs, process, "hello")
    assert publish(graphs, process)["published"] == 1
    assert publish(graphs, process)["through"] is None


def test_without_a_bus_publishing_is_refused_and_changes_nothing(graphs: Graphs,
                                                                 tmp_path: Path):
    p = Process(tmp_path / "data", None)
    try:
        ingest(graphs, p, "hello")
        with pytest.raises(InvalidInput, match="VERITAS_SHARED_DIR"):
            publish(graphs, p)
        assert p.rows("SELECT count(*) FROM cursors") == [(0,)]
    finally:
        p.store.close()
