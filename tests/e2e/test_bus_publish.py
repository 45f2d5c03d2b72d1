"""Turns published to the coordination bus by the real server processes:
two server processes on one store publish in the background and the bus
receives every turn once, across restarts and next to the operator's
`stenographer bus publish`; a locked bus shows in stenographer_capture_status while
ingests go on, and once it is released every turn arrives, once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import apsw
import pytest
from mcp.client import Client

from tests.busfile import make_bus
from tests.e2e.support import INGEST, INGEST_LINE, REPO_ROOT, STATUS, server_env, stdio_params
from tests.e2e.test_bus import call

pytestmark = pytest.mark.anyio

FAST = {"STENO_BUS_INTERVAL": "0.1", "STENO_BUS_BATCH": "3"}


def published(path: Path) -> list[dict[str, Any]]:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    conn.set_busy_timeout(5_000)
    try:
        return [json.loads(r[0]) for r in conn.execute(
            "SELECT payload FROM events WHERE event_type = 'STENO_EXCHANGE' ORDER BY id")]
    finally:
        conn.close()


async def until_published(path: Path, count: int, timeout: float = 60.0) -> None:
    with anyio.fail_after(timeout):
        while len(published(path)) < count:
            await anyio.sleep(0.1)


def bus_cli(data: Path, shared: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**server_env(data, VERITAS_SHARED_DIR=str(shared)), "HOME": str(data.parent)}
    return subprocess.run([sys.executable, "-m", "stenographer", "bus", "publish", *args],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.mark.slow
async def test_two_server_processes_publish_each_turn_once_across_restarts(tmp_path: Path):
    shared, data = tmp_path / "veritas-shared", tmp_path / "data"
    path = make_bus(shared)
    params = stdio_params(data, VERITAS_SHARED_DIR=str(shared), **FAST)

    async def burst(client: Client, who: int, rounds: int) -> None:
        for i in range(rounds):
            line, _ = await call(client, INGEST, {"role": "user", "session_id": f"task-{who}",
                                                  "content": f"process {who} turn {i}"})
            assert INGEST_LINE.fullmatch(line), line

    async with (Client(params, mode="auto", read_timeout_seconds=60) as first,
                Client(params, mode="legacy", read_timeout_seconds=60) as second):
        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                for who, client in enumerate((first, second)):
                    for _ in range(2):  # two calls in flight per process
                        tg.start_soon(burst, client, who, 10)
        await until_published(path, 40)
        await anyio.sleep(0.5)  # both publishers ran more rounds: still once each
        text, status = await call(first, STATUS, {})
        publishing = status["status"]["bus"]["publishing"]
        assert publishing["pending"] == 0 and publishing["delivered"] == 40
        assert "; publishing: 40 delivered, 0 pending, last success " in text

    # Restarted servers, ingests while stopped (the operator's command), more turns.
    turns = published(path)
    assert sorted(p["exchange_id"] for p in turns) == list(range(1, 41))
    assert len({p["key"] for p in turns}) == 40
    assert {p["session"] for p in turns} == {"task-0", "task-1"}
    cli = bus_cli(data, shared)
    assert cli.returncode == 0 and "0 batches, 0 new events" in cli.stdout, cli
    async with (Client(params, mode="auto", read_timeout_seconds=60) as first,
                Client(params, mode="legacy", read_timeout_seconds=60) as second):
        async with anyio.create_task_group() as tg:
            tg.start_soon(burst, first, 0, 3)
            tg.start_soon(burst, second, 1, 3)
        await until_published(path, 46)
        await anyio.sleep(0.5)
    turns = published(path)
    assert len(turns) == len({p["key"] for p in turns}) == 46


async def test_a_locked_bus_shows_in_status_while_ingest_goes_on(tmp_path: Path):
    shared, data = tmp_path / "veritas-shared", tmp_path / "data"
    path = make_bus(shared)
    params = stdio_params(data, VERITAS_SHARED_DIR=str(shared), STENO_BUS_TIMEOUT_MS="20",
                          STENO_BUS_PUBLISH_TIMEOUT_MS="50", **FAST)
    async with Client(params, mode="auto", read_timeout_seconds=60) as client:
        await call(client, INGEST, {"role": "user", "session_id": "s", "content": "before"})
        await until_published(path, 1)
        holder = apsw.Connection(str(path))
        holder.execute("BEGIN EXCLUSIVE")
        try:
            for i in range(4):
                line, _ = await call(client, INGEST, {"role": "user", "session_id": "s",
                                                      "content": f"while locked {i}"})
                assert INGEST_LINE.fullmatch(line), line
            with anyio.fail_after(30):  # the publisher tried and recorded why it failed
                while True:
                    text, status = await call(client, STATUS, {})
                    publishing = status["status"]["bus"]["publishing"]
                    if publishing["last_error"]:
                        break
                    await anyio.sleep(0.1)
            assert "the bus is locked" in publishing["last_error"]
            assert publishing["pending"] == 4 and publishing["delivered"] == 1
            assert status["status"]["bus"]["state"] == "locked"
            assert f"bus: locked at {path}" in text and "4 pending, last success" in text
            assert status["status"]["store"]["exchanges"] == 5
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        await until_published(path, 5, timeout=90)  # back-off, then delivered
        await anyio.sleep(0.5)  # more rounds: nothing is published twice
        _, status = await call(client, STATUS, {})
        assert status["status"]["bus"]["publishing"]["pending"] == 0
    turns = published(path)
    assert [p["excerpt"] for p in turns] == ["before"] + [f"while locked {i}" for i in range(4)]
