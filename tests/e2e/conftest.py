"""End-to-end fixtures: the real server through the real MCP SDK client.

``conn`` is parametrized over transport (in memory, stdio, and stdio on a PostgreSQL
store: ``pgstdio``) and handshake (``auto``: the current protocol; ``legacy``: the 2025
initialize handshake; PostgreSQL only with ``auto``). In-memory connections get
a fresh store per test. A stdio server costs ~1.5 s to start, so each test module shares
one per handshake mode; tests that share it write to sessions of their own.
``shared_conn`` shares the in-memory servers per module too.

A module may set ``SERVER_ENV`` (e.g. a small STENO_MAX_CONTENT_CHARS) for its servers.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client
from mcp_types import CallToolResult

from stenographer.server import mcp
from tests.e2e.support import STATUS, stdio_params
from tests.pg_server import PostgresServer

MODES = ("auto", "legacy")
TRANSPORTS = [("memory", m) for m in MODES] + [("stdio", m) for m in MODES] + [
    ("pgstdio", "auto")]
CALL_TIMEOUT = 60.0  # seconds; generous for a loaded 2-core machine, never infinite


@dataclass
class Conn:
    client: Client
    transport: str
    mode: str
    data_dir: Path
    database_url: str | None = None  # a PostgreSQL store (pgstdio)

    @property
    def db_path(self) -> Path | str:
        """The store: its SQLite file, or its PostgreSQL URL."""
        return self.database_url or self.data_dir / "steno.db"

    async def call(self, name: str, arguments: dict[str, Any] | None = None,
                   timeout: float = CALL_TIMEOUT) -> CallToolResult:
        with anyio.fail_after(timeout):
            return await self.client.call_tool(name, arguments or {})

    async def ok(self, name: str, arguments: dict[str, Any] | None = None) -> CallToolResult:
        result = await self.call(name, arguments)
        assert not result.is_error, result.content
        assert result.structured_content is not None
        return result

    async def read(self, uri: str) -> str:
        with anyio.fail_after(CALL_TIMEOUT):
            res = await self.client.read_resource(uri, cache_mode="bypass")
        assert len(res.contents) == 1
        return str(res.contents[0].text)  # type: ignore[union-attr]

    async def counts(self) -> dict[str, int]:
        status = (await self.ok(STATUS)).structured_content
        assert status is not None
        store = status["status"]["store"]
        return {k: store[k] for k in ("sessions", "exchanges", "uncompressed", "briefs",
                                      "milestones")}


def _module_env(request: pytest.FixtureRequest) -> dict[str, str]:
    return dict(getattr(request.module, "SERVER_ENV", {}))


def in_process_env(monkeypatch: pytest.MonkeyPatch, data_dir: Path,
                   env: dict[str, str] | None = None) -> None:
    """The environment a server in this process opens its store from: ``data_dir``, no
    other STENO_ setting but ``env``'s."""
    for key in list(os.environ):
        if key.startswith("STENO_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("OMEGA_STENOGRAPHER_DIR", str(data_dir))
    monkeypatch.setenv("VERITAS_SHARED_DIR", str(data_dir / "veritas-shared"))  # not ~
    for key, value in (env or {}).items():
        monkeypatch.setenv(key, value)


@asynccontextmanager
async def memory_conn(mode: str, data_dir: Path, monkeypatch: pytest.MonkeyPatch,
                      env: dict[str, str]) -> AsyncIterator[Conn]:
    """The server in this process; its lifespan reads the environment on entry."""
    in_process_env(monkeypatch, data_dir, env)
    async with Client(mcp, mode=mode, raise_exceptions=True,
                      read_timeout_seconds=CALL_TIMEOUT) as client:
        yield Conn(client, "memory", mode, data_dir)


@pytest.fixture(scope="module")
async def stdio_servers(request: pytest.FixtureRequest,
                        tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[dict[str, Conn]]:
    env = _module_env(request)
    async with AsyncExitStack() as stack:
        servers = {}
        for mode in MODES:
            data_dir = tmp_path_factory.mktemp(f"stdio-{mode}")
            # read_timeout_seconds bounds the handshake and every request.
            client = await stack.enter_async_context(
                Client(stdio_params(data_dir, **env), mode=mode,
                       read_timeout_seconds=CALL_TIMEOUT))
            servers[mode] = Conn(client, "stdio", mode, data_dir)
        yield servers


@pytest.fixture(scope="module")
async def pgstdio_servers(request: pytest.FixtureRequest, postgres_server: PostgresServer,
                          tmp_path_factory: pytest.TempPathFactory
                          ) -> AsyncIterator[dict[str, Conn]]:
    """A stdio server whose store is a fresh PostgreSQL database (STENO_DATABASE_URL)."""
    url = postgres_server.database()
    env = {**_module_env(request), "STENO_DATABASE_URL": url}
    data_dir = tmp_path_factory.mktemp("pgstdio")
    async with Client(stdio_params(data_dir, **env), mode="auto",
                      read_timeout_seconds=CALL_TIMEOUT) as client:
        yield {"auto": Conn(client, "pgstdio", "auto", data_dir, url)}


@pytest.fixture(scope="module")
async def memory_servers(request: pytest.FixtureRequest,
                         tmp_path_factory: pytest.TempPathFactory
                         ) -> AsyncIterator[dict[str, Conn]]:
    """In-memory servers shared by a module (for tests that only read or are rejected)."""
    env = _module_env(request)
    with pytest.MonkeyPatch.context() as mp:
        async with AsyncExitStack() as stack:
            servers = {}
            for mode in MODES:
                conn = await stack.enter_async_context(
                    memory_conn(mode, tmp_path_factory.mktemp(f"memory-{mode}"), mp, env))
                await conn.counts()  # the store is open: the environment was read
                servers[mode] = conn
            yield servers


@pytest.fixture(params=TRANSPORTS, ids=[f"{t}-{m}" for t, m in TRANSPORTS])
def transport(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def shared_conn(transport: tuple[str, str], request: pytest.FixtureRequest) -> Conn:
    """A connection to a server (and store) shared by the test module."""
    servers: dict[str, Conn] = request.getfixturevalue(f"{transport[0]}_servers")
    return servers[transport[1]]


@pytest.fixture
def shared_stdio(transport: tuple[str, str], request: pytest.FixtureRequest) -> Conn | None:
    # Resolved from a sync fixture: async fixtures cannot request others dynamically.
    if transport[0] == "memory":
        return None
    servers: dict[str, Conn] = request.getfixturevalue(f"{transport[0]}_servers")
    return servers[transport[1]]


@pytest.fixture
async def conn(transport: tuple[str, str], shared_stdio: Conn | None, tmp_path: Path,
               monkeypatch: pytest.MonkeyPatch,
               request: pytest.FixtureRequest) -> AsyncIterator[Conn]:
    if shared_stdio is not None:
        yield shared_stdio
        return
    async with memory_conn(transport[1], tmp_path, monkeypatch, _module_env(request)) as c:
        yield c


@pytest.fixture(params=MODES)
async def memory(request: pytest.FixtureRequest, tmp_path: Path,
                 monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Conn]:
    """In memory only (for inputs that the stdio client cannot even encode)."""
    async with memory_conn(request.param, tmp_path, monkeypatch, _module_env(request)) as c:
        yield c
