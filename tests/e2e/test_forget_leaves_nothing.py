"""Forgetting leaves nothing, through the real server over stdio and real processes.

Turns holding an unusual mixed-case word are ingested, compressed, searched for (by the
server and by another process), guarded and briefed on, then forgotten; afterwards no
byte of the data directory holds the word in any letter case, neither raw nor inside
any compressed value (tests.bytescan), while the server runs and after it stops. A
forget while another process holds an old read snapshot finishes rewriting the file
once the reader lets go, and stenographer_capture_status shows it pending, then done.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
import zstandard
from mcp.client import Client

from store.runs import encode_trace
from tests.bytescan import places_holding
from tests.e2e.support import (
    FORGET,
    GUARD,
    INGEST,
    MILESTONE,
    NOTES,
    REPO_ROOT,
    SEARCH,
    STATUS,
    server_env,
    stdio_params,
    text,
)
from tests.e2e.test_bus import call

pytestmark = pytest.mark.anyio

MARKER = "QuillowmereVantabrisk"  # in no other test, in no dictionary
ENV = {"STENO_TURN_LIMIT": "4"}


def cli(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`stenographer ARGS` in its own process on the same store."""
    return subprocess.run([sys.executable, "-m", "stenographer", *args], cwd=REPO_ROOT,
                          env=server_env(data, **ENV), capture_output=True, text=True,
                          timeout=120, check=False)


async def ingest(client: Client, session: str, content: str) -> int:
    _, out = await call(client, INGEST, {"role": "user", "session_id": session,
                                         "content": content})
    return int(out["exchange_id"])


def test_the_scan_finds_the_word_raw_and_inside_compressed_values(tmp_path: Path):
    word = MARKER.encode()
    (tmp_path / "zstd").write_bytes(b"\x00head" + zstandard.compress(word * 3) + b"tail")
    (tmp_path / "trace").write_bytes(encode_trace({"text": MARKER.lower()}))
    (tmp_path / "zlib").write_bytes(b"xx" + zlib.compress(word.lower()))
    (tmp_path / "gzip").write_bytes(gzip.compress(word.upper()))
    (tmp_path / "plain").write_bytes(b"..." + word.swapcase() + b"...")
    (tmp_path / "clean").write_bytes(zlib.compress(b"nothing here") * 3)
    found = places_holding(tmp_path, MARKER)
    assert {"zstd zstd@5", "trace zstd+dict@1", "zlib zlib@2", "gzip gzip@0",
            "plain"} <= set(found), found
    assert not [place for place in found if place.startswith("clean")]


async def test_after_forgetting_no_byte_of_the_data_directory_holds_it(tmp_path: Path):
    data = tmp_path / "data"
    async with Client(stdio_params(data, **ENV), mode="auto",
                      read_timeout_seconds=60) as client:
        ids = []
        for i in range(9):  # two briefs, one live turn; the turns after it borrow its words
            content = (f"Decision: the release codename is {MARKER}, approved by legal."
                       if i == 1 else f"Blocked: {MARKER} assets time out in the CDN upload."
                       if i == 5 else f"Launch checklist item {i}: store listing and QA.")
            ids.append(await ingest(client, "launch", content))
        await ingest(client, "side", f"a side note: {MARKER} once more, in another session")
        await call(client, MILESTONE, {"session_id": "launch", "exchange_id": ids[1],
                                       "label": f"{MARKER} approved"})
        # Queries and replies holding it: searches, the guard, the running notes.
        _, hits = await call(client, SEARCH, {"query": MARKER, "cross_session": True,
                                              "mode": "keyword"})
        assert {ids[1], ids[5]} <= {h["exchange_id"] for h in hits["hits"]}
        await call(client, SEARCH, {"query": f"why was {MARKER.lower()} chosen?",
                                    "session_id": "launch", "mode": "semantic"})
        guard, _ = await call(client, GUARD, {"session_id": "launch", "query": MARKER})
        notes, _ = await call(client, NOTES, {"session_id": "launch"})
        assert MARKER in guard and MARKER in notes
        other = cli(data, "search", MARKER, "--all", "--json")  # another process
        assert other.returncode == 0 and MARKER in other.stdout, other
        assert places_holding(data, MARKER)  # the scan sees it before

        reply, out = await call(client, FORGET, {"text": MARKER, "confirm": True})
        assert out["count"] == 3 and MARKER not in reply, reply

        # Searched for again afterwards, here and by another process: nothing found,
        # and their traces (stored after the forget) hold no query text either.
        _, hits = await call(client, SEARCH, {"query": MARKER, "cross_session": True,
                                              "mode": "keyword"})
        assert hits["hits"] == []
        other = cli(data, "search", MARKER.lower(), "--all", "--json")
        assert other.returncode in (0, 1) and MARKER.lower() not in other.stdout.lower(), other
        _, status = await call(client, STATUS, {})
        assert status["status"]["store"]["rewrite"]["state"] == "done"
        # Reading a stored run makes the server store the traces it still holds.
        run = await client.read_resource(f"omega-stenographer://runs/{hits['trace']['run_id']}")
        assert json.loads(run.contents[0].text)["graph"] == "search"  # type: ignore[union-attr]
        assert places_holding(data, MARKER) == []
    assert places_holding(data, MARKER) == []  # and once the server has closed the store


HOLD_SNAPSHOT = """
import sys, apsw
conn = apsw.Connection(sys.argv[1])
conn.execute("BEGIN")
print(conn.execute("SELECT count(*) FROM exchanges").fetchone()[0], flush=True)
sys.stdin.readline()
conn.execute("COMMIT")
"""


@contextmanager
def reader_holding_a_snapshot(db: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process in a read transaction of ``db`` until its stdin gets a line."""
    with subprocess.Popen([sys.executable, "-c", HOLD_SNAPSHOT, str(db)], text=True,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE) as proc:
        try:
            assert proc.stdout is not None and int(proc.stdout.readline()) > 0
            yield proc
        finally:
            proc.kill()  # no-op once released


def release(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.write("\n")
    proc.stdin.flush()
    assert proc.wait(timeout=30) == 0


async def rewrite_state(client: Client) -> tuple[str, dict[str, Any]]:
    line, status = await call(client, STATUS, {})
    return line, status["status"]["store"]["rewrite"]


async def test_a_rewrite_held_up_by_a_reader_finishes_once_it_lets_go(tmp_path: Path):
    data = tmp_path / "data"
    async with Client(stdio_params(data, **ENV), mode="auto",
                      read_timeout_seconds=60) as client:
        for i in range(6):
            await ingest(client, "s", f"turn {i} names {MARKER}" if i % 3 == 0
                         else f"turn {i} is about the deploy window")
        with reader_holding_a_snapshot(data / "steno.db") as reader:
            result = await client.call_tool(FORGET, {"text": MARKER, "confirm": True})
            assert not result.is_error, result.content
            out = result.structured_content
            assert out is not None and out["count"] == 2 and out["rewrite_pending"], out
            assert "rewrite pending" in text(result) and "another connection" in text(result)
            line, rewrite = await rewrite_state(client)
            assert rewrite["state"] == "pending" and rewrite["pending_since"], rewrite
            assert "file rewrite after forget: pending since" in line
            # Honest: the reader's snapshot still needs the old pages, so they are there.
            assert any(p.startswith("steno.db") for p in places_holding(data, MARKER))
            release(reader)
        with anyio.fail_after(30):
            while (await rewrite_state(client))[1]["state"] != "done":
                await anyio.sleep(0.05)
        line, rewrite = await rewrite_state(client)
        assert rewrite["done_at"] and rewrite["pending_since"] is None
        assert "file rewrite after forget: done at" in line
        assert places_holding(data, MARKER) == []  # while the server still runs
