"""Two server processes on one store, writing into one session at the same time.

Compression must stay atomic across processes (spec §4): every compressed turn is in
exactly one brief, none is skipped, no brief mixes sessions, and nothing accepted is
lost (invariant 5).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import apsw
import pytest
from mcp.client import Client

from tests.e2e.support import COMPRESSED, INGEST, INGEST_LINE, stdio_params, text

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

TURNS = 1_000  # per process, into the shared session
PRIVATE_EVERY = 25  # and every 25th turn one more into the process's own session
IN_FLIGHT = 6  # pipelined calls per client
TURN_LIMIT = 8
SHARED = "shared-session"


def content(process: int, i: int) -> str:
    if i % 9 == 0:
        return f"p{process} turn {i}: we decided to shard table t{i} by tenant."
    if i % 13 == 0:
        return f"p{process} turn {i}: the migration for t{i} is blocked by a lock timeout."
    return f"p{process} turn {i}: routine progress on component c{i % 17}."


async def run_client(client: Client, process: int, replies: list[dict[str, Any]]) -> None:
    async def worker(start: int) -> None:
        for i in range(start, TURNS, IN_FLIGHT):
            jobs = [(SHARED, content(process, i))]
            if i % PRIVATE_EVERY == 0:
                jobs.append((f"private-{process}", f"p{process} private note {i}"))
            for session, body in jobs:
                result = await client.call_tool(INGEST, {
                    "role": "assistant" if i % 2 else "user", "content": body,
                    "session_id": session})
                replies.append({"session": session, "content": body, "error": result.is_error,
                                "text": text(result), "sc": result.structured_content})

    async with anyio.create_task_group() as tg:
        for start in range(IN_FLIGHT):
            tg.start_soon(worker, start)


def rows(conn: apsw.Connection, sql: str) -> list[tuple[Any, ...]]:
    return list(conn.execute(sql))


async def test_two_processes_ingest_into_one_session_at_once(tmp_path: Path):
    replies: list[list[dict[str, Any]]] = [[], []]
    async with (
        Client(stdio_params(tmp_path), mode="auto", read_timeout_seconds=60) as first,
        Client(stdio_params(tmp_path), mode="legacy", read_timeout_seconds=60) as second,
    ):
        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                tg.start_soon(run_client, first, 0, replies[0])
                tg.start_soon(run_client, second, 1, replies[1])

    every = replies[0] + replies[1]
    private_per_process = len(range(0, TURNS, PRIVATE_EVERY))
    assert len(every) == 2 * (TURNS + private_per_process)
    failed = [r for r in every if r["error"] or not INGEST_LINE.fullmatch(r["text"])]
    assert not failed, failed[:3]
    reported_ids = [r["sc"]["exchange_id"] for r in every]
    assert len(set(reported_ids)) == len(every)
    reported_briefs = [b["id"] for r in every for b in r["sc"]["compressed"]]
    assert len(reported_briefs) == len(set(reported_briefs))  # each brief reported once
    assert len(reported_briefs) == sum(len(COMPRESSED.findall(r["text"])) for r in every)

    conn = apsw.Connection(str(tmp_path / "steno.db"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        sessions = dict(rows(conn, "SELECT name, id FROM sessions"))
        assert set(sessions) == {SHARED, "private-0", "private-1"}
        stored = rows(conn, "SELECT id, session_id, content FROM exchanges")
        assert len(stored) == len(every)
        assert {(sid, body) for _, sid, body in stored} == {
            (sessions[r["session"]], r["content"]) for r in every}  # each stored once
        assert {i for i, _, _ in stored} == set(reported_ids)
        shared = [row for row in stored if row[1] == sessions[SHARED]]
        assert len(shared) == 2 * TURNS

        # Every compressed turn is in exactly one brief, and its brief_id says which.
        sources = rows(conn, "SELECT brief_id, exchange_id, content_hash FROM brief_sources")
        assert len({e for _, e, _ in sources}) == len(sources)
        compressed = dict(rows(conn, "SELECT id, brief_id FROM exchanges "
                                     "WHERE brief_id IS NOT NULL"))
        assert {e: b for b, e, _ in sources} == compressed
        assert rows(conn, """
            SELECT count(*) FROM brief_sources s JOIN exchanges e ON e.id = s.exchange_id
            WHERE e.content_hash != s.content_hash""") == [(0,)]
        # No brief holds a turn of another session; every brief is one full batch.
        assert rows(conn, """
            SELECT count(*) FROM brief_sources s JOIN briefs b ON b.id = s.brief_id
            JOIN exchanges e ON e.id = s.exchange_id WHERE e.session_id != b.session_id
            """) == [(0,)]
        briefs = rows(conn, """
            SELECT b.id, b.turns, b.first_exchange_id, b.last_exchange_id, count(s.exchange_id),
                   min(s.exchange_id), max(s.exchange_id)
            FROM briefs b LEFT JOIN brief_sources s ON s.brief_id = b.id GROUP BY b.id""")
        assert sorted(b[0] for b in briefs) == sorted(reported_briefs)
        for _, turns, first_id, last_id, n, low, high in briefs:
            assert turns == n == TURN_LIMIT and (first_id, last_id) == (low, high)
        # Fewer than STENO_TURN_LIMIT turns are left uncompressed in each session.
        for name, sid in sessions.items():
            [(live,)] = rows(conn, f"SELECT count(*) FROM exchanges WHERE session_id = {sid} "
                                   "AND brief_id IS NULL")
            assert live < TURN_LIMIT, (name, live)
        assert len(compressed) + sum(
            1 for _ in conn.execute("SELECT 1 FROM exchanges WHERE brief_id IS NULL")
        ) == len(every)
    finally:
        conn.close()
    # The hash chain of the shared session was extended by both processes in turn: each
    # link was made inside its write transaction, so the audit finds it unbroken.
    from stenographer.app import open_app
    from stenographer.settings import Settings

    app = open_app(Settings(data_dir=tmp_path, turn_limit=TURN_LIMIT))
    try:
        out, _ = app.run("contract_audit", {})
    finally:
        app.close()
    assert out["report"]["passed"], out["report"]["text"]
