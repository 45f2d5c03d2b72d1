"""A store that cannot be written, end to end: the real stdio server driven by the SDK
client, on real file systems (``tests.mounts``; mounting needs root, as in CI).

- A full disk (a small tmpfs filled to the last byte): every write says that the disk
  holding the data directory is full and that nothing was stored; nothing stored
  changes; reads keep working; once space is freed, writes work again.
- A read-only file system (a read-only bind mount of a store's directory): the store
  opens read-only, every read tool and resource answers, every write is refused with
  the reason, status says so, and nothing on the file system changes. A store there
  that needs a migration is refused at open, saying so.
- Any other failure of a run (here a store missing one of its tables) still says
  which graph and stage failed and why, instead of the SDK's bare "Error executing
  tool".
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import anyio
import apsw
import pytest
from mcp.client import Client

from stenographer.app import open_app
from stenographer.settings import Settings
from store.migrations import SCHEMA_VERSION
from tests.cli.conftest import run_cli
from tests.e2e.support import (
    AUDIT,
    FORGET,
    GRAPH_QUERY,
    GUARD,
    INGEST,
    MILESTONE,
    NOTES,
    SEARCH,
    STATUS,
    db_digest,
    stdio_params,
    text,
    word,
)
from tests.mounts import fill, read_only_view, tmpfs
from tests.schema_stores import store_at_schema

pytestmark = pytest.mark.anyio

CALL_TIMEOUT = 60.0
TURN_LIMIT = 8


async def call(client: Client, name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
    with anyio.fail_after(CALL_TIMEOUT):
        result = await client.call_tool(name, arguments)
    return result.is_error, text(result)


async def ok(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    with anyio.fail_after(CALL_TIMEOUT):
        result = await client.call_tool(name, arguments)
    assert not result.is_error, text(result)
    assert result.structured_content is not None
    return result.structured_content


async def test_a_full_disk_refuses_writes_saying_so_and_keeps_serving_reads(tmp_path: Path):
    session, kept, lost = word(), word(), word()
    with tmpfs(tmp_path / "disk", "4m") as disk:
        data = disk / "data"
        async with Client(stdio_params(data), read_timeout_seconds=CALL_TIMEOUT) as client:
            first = await ok(client, INGEST, {"role": "user", "session_id": session,
                                              "content": f"{kept}: recorded with room left"})
            filler = fill(disk)
            full = f"the disk holding {data} is full: nothing was stored or changed"
            refused = None
            stored = [first["exchange_id"]]
            for i in range(50):  # a write that fits in space SQLite already holds passes
                before = db_digest(data / "steno.db")
                with anyio.fail_after(CALL_TIMEOUT):
                    result = await client.call_tool(INGEST, {
                        "role": "user", "session_id": session,
                        "content": f"{lost} {i}: " + "a turn that needs room " * 200})
                if result.is_error:
                    refused = text(result)
                    break
                assert result.structured_content is not None
                stored.append(result.structured_content["exchange_id"])
            assert refused is not None, "50 turns were stored on a full disk"
            assert full in refused and "Free some space there" in refused, refused
            assert db_digest(data / "steno.db") == before  # nothing stored changed

            error, reply = await call(client, FORGET, {"confirm": True,
                                                       "exchange_ids": [stored[0]]})
            assert error and full in reply, reply
            assert db_digest(data / "steno.db") == before

            hits = await ok(client, SEARCH, {"query": kept, "session_id": session})
            assert [h["exchange_id"] for h in hits["hits"]] == [stored[0]]
            notes = await ok(client, NOTES, {"session_id": session})
            assert f"#{stored[0]}" in notes["markdown"]
            status = await ok(client, STATUS, {})
            assert status["status"]["store"]["exchanges"] == len(stored)

            filler.unlink()  # room again: the next write goes through
            again = await ok(client, INGEST, {"role": "user", "session_id": session,
                                              "content": f"{kept}: after the disk was freed"})
            assert again["exchange_id"] > stored[-1]


def file_digests(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.iterdir())}


@pytest.fixture
def written(tmp_path: Path) -> tuple[Path, str, list[int]]:
    """A store written and closed where it is writable: one compressed session."""
    data, session = tmp_path / "rw", word()
    app = open_app(Settings(data_dir=data, shared_dir=None))
    try:
        ids = [app.run("ingest", {"role": "user", "session_id": session,
                                  "content": f"{session} step {i}: we chose the blue "
                                             "deploy pipeline"})[0]["reply"]["exchange_id"]
               for i in range(TURN_LIMIT + 1)]
    finally:
        app.close()
    return data, session, ids


async def test_a_read_only_file_system_serves_every_read_and_refuses_writes(
        tmp_path: Path, written: tuple[Path, str, list[int]]):
    source, session, ids = written
    files = file_digests(source)
    refusal = ("is read-only (its file system is mounted read-only): nothing was stored "
               "or changed; reads keep working")
    with read_only_view(source, tmp_path / "ro") as data:
        async with Client(stdio_params(data), read_timeout_seconds=CALL_TIMEOUT) as client:
            hits = await ok(client, SEARCH, {"query": "blue deploy", "session_id": session})
            assert {h["exchange_id"] for h in hits["hits"]} <= set(ids) and hits["hits"]
            notes = await ok(client, NOTES, {"session_id": session})
            assert f"#{ids[-1]}" in notes["markdown"]
            guard = await ok(client, GUARD, {"session_id": session, "query": "pipeline"})
            assert len(guard["brief_ids"]) == 1
            audit = await ok(client, AUDIT, {})
            assert audit["passed"], audit["text"]
            await ok(client, GRAPH_QUERY, {"query": "deploy pipeline", "cross_session": True})
            with anyio.fail_after(CALL_TIMEOUT):
                resource = await client.read_resource(
                    f"omega-stenographer://sessions/{session}/notes", cache_mode="bypass")
            assert resource.contents[0].text == notes["markdown"]  # type: ignore[union-attr]
            status = await ok(client, STATUS, {})
            assert status["status"]["store"]["read_only"] is True
            assert status["status"]["store"]["exchanges"] == len(ids)
            assert "(read-only: calls that write are refused)" in status["text"]

            for name, arguments in (
                    (INGEST, {"role": "user", "session_id": session, "content": "one more"}),
                    (MILESTONE, {"session_id": session, "exchange_id": ids[0],
                                 "label": "first"}),
                    (FORGET, {"confirm": True, "exchange_ids": [ids[0]]})):
                error, reply = await call(client, name, arguments)
                assert error and f"the store {data / 'steno.db'} {refusal}" in reply, reply
    assert file_digests(source) == files  # not a byte written, no log or index file made


def test_a_read_only_store_that_needs_a_migration_is_refused_saying_so(tmp_path: Path):
    source = tmp_path / "old"
    store_at_schema(source / "steno.db", SCHEMA_VERSION - 1).close()
    with read_only_view(source, tmp_path / "ro") as data:
        done = run_cli(data, "status")
    assert done.code == 2, done.err
    assert (f"the store {data / 'steno.db'} needs 1 schema migration(s) to reach version "
            f"{SCHEMA_VERSION}, but it is read-only (its file system is mounted read-only)"
            in done.err), done.err
    assert "Traceback" not in done.err


async def test_an_unexpected_failure_says_which_graph_and_stage_and_why(
        written: tuple[Path, str, list[int]]):
    data, session, _ = written
    conn = apsw.Connection(str(data / "steno.db"))
    conn.execute("DROP TABLE milestones")
    conn.close()
    async with Client(stdio_params(data), read_timeout_seconds=CALL_TIMEOUT) as client:
        error, reply = await call(client, NOTES, {"session_id": session})
    assert error, reply
    assert reply.startswith("Error executing tool stenographer_get_brief: internal error "
                            "in the notes graph, stage "), reply
    assert "SQLError: no such table: milestones. Not caused by the call's arguments: " \
        "`stenographer doctor` and `stenographer audit` check" in reply, reply
