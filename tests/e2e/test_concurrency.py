"""Server processes on one store, writing into shared sessions at the same time.

Compression must stay atomic across processes: every compressed turn is in
exactly one brief, none is skipped, no brief mixes sessions, and nothing accepted is
lost (invariant 5). Two processes share the SQLite file; eight share one PostgreSQL
database, each with a data directory of its own, as servers on eight hosts would.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import apsw
import pytest
from mcp.client import Client

from store.exchanges import turn_trace_sql
from store.provenance import GENESIS, chain_hash
from tests.e2e.support import COMPRESSED, INGEST, INGEST_LINE, stdio_params, text
from tests.pg_server import PostgresServer

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

TURNS = 1_000  # per process, into the shared session
PRIVATE_EVERY = 25  # and every 25th turn one more into the process's own session
IN_FLIGHT = 6  # pipelined calls per client
TURN_LIMIT = 8
SHARED = "shared-session"

# PostgreSQL: eight processes, each writing 2,000 turns spread over four shared sessions.
PG_PROCESSES = 8
PG_TURNS = 2_000
PG_SESSIONS = tuple(f"team-session-{n}" for n in range(4))
PG_IN_FLIGHT = 4

Job = tuple[str, str, str]  # (session, role, content)
Rows = Callable[[str], list[tuple[Any, ...]]]


def content(process: int, i: int) -> str:
    if i % 9 == 0:
        return f"p{process} turn {i}: we decided to shard table t{i} by tenant."
    if i % 13 == 0:
        return f"p{process} turn {i}: the migration for t{i} is blocked by a lock timeout."
    return f"p{process} turn {i}: routine progress on component c{i % 17}."


def role(i: int) -> str:
    return "assistant" if i % 2 else "user"


def shared_and_private(process: int) -> list[Job]:
    """Every turn into the shared session, every 25th one more into a private one."""
    jobs = []
    for i in range(TURNS):
        jobs.append((SHARED, role(i), content(process, i)))
        if i % PRIVATE_EVERY == 0:
            jobs.append((f"private-{process}", role(i), f"p{process} private note {i}"))
    return jobs


def spread_over_sessions(process: int) -> list[Job]:
    """PG_TURNS turns, round robin over the shared sessions."""
    return [(PG_SESSIONS[i % len(PG_SESSIONS)], role(i), content(process, i))
            for i in range(PG_TURNS)]


async def run_client(client: Client, jobs: Sequence[Job], replies: list[dict[str, Any]],
                     in_flight: int = IN_FLIGHT) -> None:
    """Ingest ``jobs`` with ``in_flight`` calls pipelined, each worker in job order."""
    async def worker(start: int) -> None:
        for session, who, body in jobs[start::in_flight]:
            result = await client.call_tool(INGEST, {
                "role": who, "content": body, "session_id": session})
            replies.append({"session": session, "content": body, "error": result.is_error,
                            "text": text(result), "sc": result.structured_content})

    async with anyio.create_task_group() as tg:
        for start in range(in_flight):
            tg.start_soon(worker, start)


def check_replies(every: list[dict[str, Any]], expected: int) -> tuple[list[int], list[int]]:
    """No call errored, each reply names its own turn and briefs; (turn ids, brief ids)."""
    assert len(every) == expected
    failed = [r for r in every if r["error"] or not INGEST_LINE.fullmatch(r["text"])]
    assert not failed, failed[:3]
    reported_ids = [r["sc"]["exchange_id"] for r in every]
    assert len(set(reported_ids)) == len(every)
    reported_briefs = [b["id"] for r in every for b in r["sc"]["compressed"]]
    assert len(reported_briefs) == len(set(reported_briefs))  # each brief reported once
    assert len(reported_briefs) == sum(len(COMPRESSED.findall(r["text"])) for r in every)
    return reported_ids, reported_briefs


def check_store(rows: Rows, every: list[dict[str, Any]], reported_ids: list[int],
                reported_briefs: list[int], turn_limit: int) -> dict[str, int]:
    """What the store holds after ``every`` reply: each turn once, each compressed turn in
    exactly one full brief of its own session, every session's chain linked. Returns
    the session name -> row id map."""
    sessions: dict[str, int] = {name: sid for name, sid in rows("SELECT name, id FROM sessions")}
    assert set(sessions) == {r["session"] for r in every}
    stored = rows("SELECT id, session_id, content FROM exchanges")
    assert len(stored) == len(every)
    assert {(sid, body) for _, sid, body in stored} == {
        (sessions[r["session"]], r["content"]) for r in every}  # each stored once
    assert {i for i, _, _ in stored} == set(reported_ids)

    # Every compressed turn is in exactly one brief, and its brief_id says which.
    sources = rows("SELECT brief_id, exchange_id, content_hash FROM brief_sources")
    assert len({e for _, e, _ in sources}) == len(sources)
    compressed = dict(rows("SELECT id, brief_id FROM exchanges WHERE brief_id IS NOT NULL"))
    assert {e: b for b, e, _ in sources} == compressed
    assert rows("""
        SELECT count(*) FROM brief_sources s JOIN exchanges e ON e.id = s.exchange_id
        WHERE e.content_hash != s.content_hash""") == [(0,)]
    # No brief holds a turn of another session; every brief is one full batch.
    assert rows("""
        SELECT count(*) FROM brief_sources s JOIN briefs b ON b.id = s.brief_id
        JOIN exchanges e ON e.id = s.exchange_id WHERE e.session_id != b.session_id
        """) == [(0,)]
    briefs = rows("""
        SELECT b.id, b.turns, b.first_exchange_id, b.last_exchange_id, count(s.exchange_id),
               min(s.exchange_id), max(s.exchange_id)
        FROM briefs b LEFT JOIN brief_sources s ON s.brief_id = b.id GROUP BY b.id""")
    assert sorted(b[0] for b in briefs) == sorted(reported_briefs)
    for _, turns, first_id, last_id, n, low, high in briefs:
        assert turns == n == turn_limit and (first_id, last_id) == (low, high)
    # Fewer than STENO_TURN_LIMIT turns are left uncompressed in each session.
    for name, sid in sessions.items():
        [(live,)] = rows(f"SELECT count(*) FROM exchanges WHERE session_id = {sid} "
                         "AND brief_id IS NULL")
        assert live < turn_limit, (name, live)
    [(uncompressed,)] = rows("SELECT count(*) FROM exchanges WHERE brief_id IS NULL")
    assert len(compressed) + uncompressed == len(every)

    # Each session's hash chain links turn to turn in id order, up to its head.
    heads = {sid: bytes(head) for sid, head in rows("SELECT id, chain_head FROM sessions")}
    names = {sid: name for name, sid in sessions.items()}
    previous = {sid: GENESIS for sid in heads}
    for sid, digest, who, created_at, source_key, trace_id, linked in rows(f"""
            SELECT e.session_id, e.content_hash, e.role, e.created_at, e.source_key,
                   {turn_trace_sql("e", "s")}, e.chain_hash
            FROM exchanges e JOIN sessions s ON s.id = e.session_id
            ORDER BY e.session_id, e.id"""):
        expected = chain_hash(previous[sid], bytes(digest), names[sid], who, created_at,
                              source_key, trace_id)
        assert bytes(linked) == expected, (names[sid], "chain broken")
        previous[sid] = expected
    assert previous == heads
    return sessions


def audit(data_dir: Path, database_url: str | None, turn_limit: int) -> None:
    """The contract audit (as `stenographer audit`) passes on the store."""
    from stenographer.app import open_app
    from stenographer.settings import Settings

    app = open_app(Settings(data_dir=data_dir, database_url=database_url,
                            turn_limit=turn_limit))
    try:
        out, _ = app.run("contract_audit", {})
    finally:
        app.close()
    assert out["report"]["passed"], out["report"]["text"]


async def test_two_processes_ingest_into_one_session_at_once(tmp_path: Path):
    replies: list[list[dict[str, Any]]] = [[], []]
    async with (
        Client(stdio_params(tmp_path), mode="auto", read_timeout_seconds=60) as first,
        Client(stdio_params(tmp_path), mode="legacy", read_timeout_seconds=60) as second,
    ):
        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                tg.start_soon(run_client, first, shared_and_private(0), replies[0])
                tg.start_soon(run_client, second, shared_and_private(1), replies[1])

    every = replies[0] + replies[1]
    private_per_process = len(range(0, TURNS, PRIVATE_EVERY))
    reported_ids, reported_briefs = check_replies(every, 2 * (TURNS + private_per_process))
    conn = apsw.Connection(str(tmp_path / "steno.db"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        sessions = check_store(lambda sql: list(conn.execute(sql)), every, reported_ids,
                               reported_briefs, TURN_LIMIT)
        assert set(sessions) == {SHARED, "private-0", "private-1"}
        [(shared,)] = conn.execute(
            f"SELECT count(*) FROM exchanges WHERE session_id = {sessions[SHARED]}")
        assert shared == 2 * TURNS
    finally:
        conn.close()
    # The hash chain of the shared session was extended by both processes in turn: each
    # link was made inside its write transaction, so the audit finds it unbroken.
    audit(tmp_path, None, TURN_LIMIT)


async def test_eight_processes_ingest_into_one_postgres_database(
        tmp_path: Path, postgres_server: PostgresServer):
    """Issue #9: eight servers (as on eight hosts: a data directory each) share one
    PostgreSQL database and ingest 2,000 turns each into four shared sessions, with
    compression running all the time. The ingest takes minutes on 2 cores that other
    work keeps busy (216 s at load 5, 359 s at load 10, 530 s at load 12), most of it
    the eight servers' CPU (Python, ~10 ms a turn) and PostgreSQL's (~6-9 ms a turn)."""
    import psycopg

    url = postgres_server.database()
    env = {"STENO_DATABASE_URL": url, "STENO_TURN_LIMIT": str(TURN_LIMIT)}
    replies: list[list[dict[str, Any]]] = [[] for _ in range(PG_PROCESSES)]
    async with AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(Client(
            stdio_params(tmp_path / f"host-{p}", **env), mode=("auto", "legacy")[p % 2],
            read_timeout_seconds=120)) for p in range(PG_PROCESSES)]
        started = time.perf_counter()
        with anyio.fail_after(1_800):
            async with anyio.create_task_group() as tg:
                for p, client in enumerate(clients):
                    tg.start_soon(run_client, client, spread_over_sessions(p), replies[p],
                                  PG_IN_FLIGHT)
        seconds = time.perf_counter() - started
    every = [r for per_process in replies for r in per_process]
    print(f"\n{len(every)} turns from {PG_PROCESSES} processes in {seconds:.1f} s "
          f"({len(every) / seconds:.0f} turns/s)")

    reported_ids, reported_briefs = check_replies(every, PG_PROCESSES * PG_TURNS)
    with psycopg.connect(url) as conn:
        sessions = check_store(lambda sql: conn.execute(sql.encode()).fetchall(), every,
                               reported_ids, reported_briefs, TURN_LIMIT)
    assert set(sessions) == set(PG_SESSIONS)
    assert reported_briefs, "compression ran"
    audit(tmp_path / "auditor", url, TURN_LIMIT)
