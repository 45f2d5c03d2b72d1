"""Forgetting a turn that NAFE flagged removes its flags with their span text (the
session keeps its trace id: not content); forgetting a CLAEG shutdown turn, an ordinary
system turn, leaves the bus receipt alone and the event is not recorded again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stenographer.app import App, open_app
from stenographer.settings import Settings
from store.bus import CONSUMER
from tests.busfile import emit, make_bus, receipts
from tests.graphs.test_signal_graphs import DRIFT

SPANS = ("Trust me", "the user said it's fine, so we can", "They probably mean")


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    return tmp_path / "veritas-shared"


@pytest.fixture
def app(tmp_path: Path, shared: Path) -> Iterator[App]:
    opened = open_app(Settings(data_dir=tmp_path / "data", shared_dir=shared,
                               bus_timeout_ms=20, turn_limit=50))
    try:
        yield opened
    finally:
        opened.close()


def ingest(app: App, content: str, role: str = "user") -> dict[str, Any]:
    out, _ = app.run("ingest", {"role": role, "content": content, "session_id": "s"})
    reply: dict[str, Any] = out["reply"]
    return reply


def file_bytes(app: App) -> bytes:
    app.store.traces.flush()
    base = app.store.path
    return b"".join(p.read_bytes() for p in (base, base.with_name(base.name + "-wal"))
                    if p.exists())


def rows(app: App, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in app.store.connection().execute(sql, params)]


def test_forgetting_a_flagged_turn_removes_its_flags_and_their_spans(app: App):
    ingest(app, "A plain turn about the parser.")
    flagged = ingest(app, DRIFT, role="assistant")
    assert flagged["nafe"] == ["AUTHORITY_DRIFT", "INTENT_INFERENCE"]
    assert [r[0] for r in rows(app, "SELECT span FROM signal_flags ORDER BY span_start")
            ] == list(SPANS)
    trace_id = rows(app, "SELECT trace_id FROM sessions WHERE name = 's'")[0][0]
    assert SPANS[2].encode() in file_bytes(app)

    out, _ = app.run("forget", {"exchange_ids": [flagged["exchange_id"]], "confirm": True})
    assert out["reply"]["count"] == 1
    assert rows(app, "SELECT count(*) FROM signal_flags") == [(0,)]
    data = file_bytes(app)
    for span in SPANS:
        assert span.encode() not in data, span
    assert rows(app, "SELECT trace_id FROM sessions WHERE name = 's'") == [(trace_id,)]
    out, _ = app.run("search", {"query": "parser", "flag": "NAFE", "session_id": "s"})
    assert out["hits"] == []
    audit, _ = app.run("contract_audit", {})
    assert audit["report"]["passed"]


def test_forgetting_a_shutdown_turn_leaves_the_receipt_and_is_not_rerecorded(
        app: App, shared: Path):
    bus = make_bus(shared)
    event = emit(bus, "s", reason="drift budget exhausted")
    reply = ingest(app, "Deploying the canary now.")
    (shutdown,) = reply["shutdowns"]
    assert shutdown["acknowledged"] and receipts(bus) == [(CONSUMER, event)]

    out, _ = app.run("forget", {"exchange_ids": [shutdown["exchange_id"]], "confirm": True})
    assert out["reply"]["count"] == 1 and out["reply"]["milestones_removed"] == 1
    assert receipts(bus) == [(CONSUMER, event)]  # the bus is not ours to edit
    again = ingest(app, "Next step after the restart.")
    assert again["shutdowns"] == []
    assert rows(app, "SELECT count(*) FROM exchanges WHERE role = 'system'") == [(0,)]
    assert b"drift budget exhausted" not in file_bytes(app)
    audit, _ = app.run("contract_audit", {})
    assert audit["report"]["passed"]
