"""CLAEG terminal-shutdown events from the coordination bus through the real server:
the ingest reply notes each event recorded, exactly once even with
two server processes on one store and across restarts; a locked or corrupt bus shows
in stenographer_capture_status while ingests go on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import apsw
import pytest
from mcp.client import Client

from tests.busfile import emit, make_bus, receipts
from tests.e2e.conftest import Conn
from tests.e2e.support import INGEST, INGEST_LINE, SHUTDOWN, STATUS, stdio_params, text, word

pytestmark = pytest.mark.anyio

CALL_TIMEOUT = 60.0


async def call(client: Client, name: str, arguments: dict[str, Any]) -> tuple[str, Any]:
    with anyio.fail_after(CALL_TIMEOUT):
        result = await client.call_tool(name, arguments)
    assert not result.is_error, result.content
    return text(result), result.structured_content


async def test_the_reply_notes_a_recorded_shutdown(conn: Conn):
    path = make_bus(conn.data_dir / "veritas-shared")
    session = word()
    event = emit(path, session, source="sswp", created_at="2026-11-30T06:30:00Z",
                 reason="attestation failed")

    reply = await conn.ok(INGEST, {"role": "assistant", "content": "Continuing the rollout.",
                                   "session_id": session})
    line, sc = text(reply), reply.structured_content
    assert sc is not None
    match = INGEST_LINE.fullmatch(line)
    assert match is not None and match["shutdowns"], line
    clause = SHUTDOWN.search(line)
    assert clause is not None and clause["source"] == "sswp"
    assert clause["at"] == "2026-11-30T06:30:00Z"
    assert sc["shutdowns"] == [{"exchange_id": int(clause["id"]), "event_id": event,
                                "source": "sswp", "at": "2026-11-30T06:30:00Z",
                                "new": True, "acknowledged": True}]
    assert int(clause["id"]) < sc["exchange_id"]
    assert (("omega-stenographer", event)) in receipts(path)

    again = await conn.ok(INGEST, {"role": "user", "content": "ok", "session_id": session})
    assert SHUTDOWN.search(text(again)) is None
    assert again.structured_content is not None and again.structured_content["shutdowns"] == []

    status = (await conn.ok(STATUS)).structured_content
    assert status is not None
    bus = status["status"]["bus"]
    assert bus["state"] == "ok" and bus["recorded_shutdowns"] >= 1
    assert bus["path"] == str(path)


def shutdown_rows(db: Path, session: str) -> list[tuple[Any, ...]]:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return list(conn.execute(
            "SELECT e.id, m.label FROM exchanges e JOIN sessions s ON s.id = e.session_id "
            "LEFT JOIN milestones m ON m.exchange_id = e.id "
            "WHERE s.name = ? AND e.role = 'system'", (session,)))
    finally:
        conn.close()


@pytest.mark.slow
async def test_two_server_processes_record_a_shutdown_once_across_restarts(tmp_path: Path):
    shared, data = tmp_path / "veritas-shared", tmp_path / "data"
    path = make_bus(shared)
    session = "task-7f3a"
    lines: list[str] = []

    async def burst(client: Client, who: int) -> None:
        for i in range(8):
            line, _ = await call(client, INGEST, {"role": "user", "session_id": session,
                                                  "content": f"process {who} turn {i}"})
            assert INGEST_LINE.fullmatch(line), line
            lines.append(line)

    params = stdio_params(data, VERITAS_SHARED_DIR=str(shared))
    async with (Client(params, mode="auto", read_timeout_seconds=CALL_TIMEOUT) as first,
                Client(params, mode="legacy", read_timeout_seconds=CALL_TIMEOUT) as second):
        for client in (first, second):  # both up, their stores open
            await call(client, STATUS, {})
        event = emit(path, session, source="omega-brain", reason="operator stop")
        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                for who, client in enumerate((first, second)):
                    for _ in range(3):  # several calls in flight per process
                        tg.start_soon(burst, client, who)

    noted = [SHUTDOWN.search(line) for line in lines]
    assert len([m for m in noted if m]) == 1, "exactly one reply notes the event"
    rows = shutdown_rows(data / "steno.db", session)
    assert len(rows) == 1 and rows[0][1].startswith("TERMINAL_SHUTDOWN from omega-brain")
    assert receipts(path) == [("omega-stenographer", event)]

    # Restarted, both servers see the receipt (and the source key): nothing new.
    async with (Client(params, mode="auto", read_timeout_seconds=CALL_TIMEOUT) as first,
                Client(params, mode="legacy", read_timeout_seconds=CALL_TIMEOUT) as second):
        for client in (first, second):
            line, sc = await call(client, INGEST, {"role": "user", "session_id": session,
                                                   "content": "after the restart"})
            assert SHUTDOWN.search(line) is None and sc["shutdowns"] == []
            _, status = await call(client, STATUS, {})
            assert status["status"]["bus"]["recorded_shutdowns"] == 1
    assert len(shutdown_rows(data / "steno.db", session)) == 1
    assert receipts(path) == [("omega-stenographer", event)]


async def test_a_locked_then_corrupt_bus_shows_in_status_while_ingest_goes_on(tmp_path: Path):
    shared, data = tmp_path / "veritas-shared", tmp_path / "data"
    path = make_bus(shared)
    emit(path, "s")
    holder = apsw.Connection(str(path))
    holder.execute("BEGIN EXCLUSIVE")  # rollback journal: readers are locked out too
    params = stdio_params(data, VERITAS_SHARED_DIR=str(shared), STENO_BUS_TIMEOUT_MS="20")
    async with Client(params, mode="auto", read_timeout_seconds=CALL_TIMEOUT) as client:
        try:
            for i in range(5):
                line, sc = await call(client, INGEST, {"role": "user", "session_id": "s",
                                                       "content": f"turn {i}"})
                assert INGEST_LINE.fullmatch(line) and sc["shutdowns"] == []
            status_text, status = await call(client, STATUS, {})
            bus = status["status"]["bus"]
            assert bus["state"] == "locked" and bus["process"]["state"] == "locked"
            # Each ingest tried the bus or skipped it during the back-off (1 s, 2 s, ...).
            tried, skipped = bus["process"]["failures"], bus["process"]["skipped"]
            assert tried >= 1 and tried + skipped == 5 and skipped >= 1
            assert f"bus: locked at {path}" in status_text
        finally:
            holder.execute("ROLLBACK")
            holder.close()

        path.write_bytes(b"\x13not a database\x00" * 256)
        line, _ = await call(client, INGEST, {"role": "user", "session_id": "s",
                                              "content": "still recording"})
        assert INGEST_LINE.fullmatch(line)
        status_text, status = await call(client, STATUS, {})
        assert status["status"]["bus"]["state"] == "corrupt"
        assert f"bus: corrupt at {path}" in status_text
        assert status["status"]["store"]["exchanges"] == 6
