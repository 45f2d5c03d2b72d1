"""Shared test set-up: the repository root on ``sys.path`` and the anyio backend."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tests.pg_server import PostgresServer, unavailable_reason  # noqa: E402


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    # Session scope so that module-scoped async fixtures (shared stdio servers) can use it.
    return "asyncio"


BACKENDS = ("sqlite", "postgresql")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the whole test run, started and stopped here."""
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    server = PostgresServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest) -> str | None:
    """None (the SQLite file) or the URL of a fresh PostgreSQL database: tests that take
    this fixture run once on each backend."""
    if request.param == "sqlite":
        return None
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return server.database()
