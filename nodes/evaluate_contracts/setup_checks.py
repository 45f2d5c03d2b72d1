"""Nodes: the set-up checks of `stenographer doctor`, one stage each, in order.

The Python version, the settings (read at the edge: the request says where the data
lives, or why the settings are invalid), the SQLite build (FTS5), the sqlite-vec
extension, the data directory (exists or can be created, owner-only, writable), free
disk space, and the store (opens, migrations current); with a database URL the
PostgreSQL database's instead: the connection (with a connect timeout), the server
version, the pgvector extension and the schema version. Each stage appends its checks
to ``checks``; no message shows the database password.

They take no run context: the ``doctor`` graph runs exactly when the store cannot be
opened, and never creates or migrates anything (store/probe.py opens an existing file
only; the database is only read).
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from pydantic import SecretStr

from nodes.context import node

__all__ = ["MIN_FREE_BYTES", "MIN_PGVECTOR", "MIN_POSTGRES", "PG_CHECKS", "SUPPORTED_PYTHON",
           "Check", "check_postgres", "check_python", "data_dir_check", "disk_check",
           "postgres_checks", "python_check", "settings_check", "settings_unchecked",
           "setup_report", "sqlite_check", "sqlite_vec_check", "store_checks",
           "writable_check"]

SUPPORTED_PYTHON = ((3, 11), (3, 13))
MIN_FREE_BYTES = 100 * 1024 * 1024
MIN_POSTGRES = 14
MIN_PGVECTOR = (0, 7)  # halfvec and its HNSW operator class
PG_CONNECT_TIMEOUT_S = 5


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str | None = None


def check_python(version: tuple[int, int] | None = None) -> Check:
    major, minor = version or sys.version_info[:2]
    (lo_major, lo_minor), (hi_major, hi_minor) = SUPPORTED_PYTHON
    ok = (lo_major, lo_minor) <= (major, minor) <= (hi_major, hi_minor)
    detail = f"Python {major}.{minor} at {sys.executable} (supported: 3.11-3.13)"
    return Check("python", ok, detail, None if ok else (
        "install Python 3.11, 3.12 or 3.13 and install the server with it, e.g. "
        "`uvx --python 3.12 omega-stenographer-mcp` or `python3.12 -m pip install "
        "omega-stenographer-mcp`"))


def check_sqlite() -> Check:
    import apsw

    from store.probe import fts5_available

    version = apsw.sqlite_lib_version()
    if fts5_available():
        return Check("sqlite", True, f"SQLite {version} with FTS5 (apsw {apsw.apsw_version()})")
    return Check("sqlite", False, f"SQLite {version} has no FTS5 (full-text search)",
                 "reinstall apsw from its wheel, which bundles SQLite with FTS5: "
                 "`pip install --force-reinstall --only-binary apsw apsw`")


def check_sqlite_vec() -> Check:
    from store.probe import sqlite_vec_version

    try:
        version = sqlite_vec_version()
    except Exception as ex:  # apsw.Error, OSError: both mean "cannot load"
        return Check("sqlite-vec", False, f"the sqlite-vec extension does not load: {ex}",
                     "reinstall it: `pip install --force-reinstall 'sqlite-vec>=0.1.6'` "
                     "(wheels exist for Linux glibc, macOS and Windows on x86-64 and arm64)")
    return Check("sqlite-vec", True, f"sqlite-vec {version} loads")


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_data_dir(data_dir: Path) -> Check:
    name = "data directory"
    if data_dir.exists() and not data_dir.is_dir():
        return Check(name, False, f"{data_dir} exists but is not a directory",
                     "point OMEGA_STENOGRAPHER_DIR at a directory, or move that file away")
    if not data_dir.exists():
        base = _nearest_existing(data_dir)
        if not base.is_dir():
            return Check(name, False, f"{data_dir} cannot be created: {base} is a file, "
                         "not a directory",
                         "point OMEGA_STENOGRAPHER_DIR at a path under a directory you own")
        if not os.access(base, os.W_OK | os.X_OK):
            return Check(name, False, f"{data_dir} cannot be created: {base} is not "
                         "writable", f"create it yourself (`mkdir -m 700 -p {data_dir}`) or "
                         "point OMEGA_STENOGRAPHER_DIR elsewhere")
        return Check(name, True, f"{data_dir} does not exist yet; it is created owner-only "
                     "(0700) on first use")
    info = data_dir.stat()
    mode = stat.S_IMODE(info.st_mode)
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        return Check(name, False, f"{data_dir} is owned by uid {info.st_uid}, not by you "
                     f"(uid {os.getuid()})",
                     f"`chown {os.getuid()} {data_dir}` or use a directory of your own")
    if os.name == "posix" and mode & 0o077:
        return Check(name, False, f"{data_dir} has mode {mode:04o}: other users can read "
                     "the memory", f"`chmod 700 {data_dir}`")
    db = data_dir / "steno.db"
    if os.name == "posix" and db.exists() and stat.S_IMODE(db.stat().st_mode) & 0o077:
        return Check(name, False, f"{db} has mode {stat.S_IMODE(db.stat().st_mode):04o}: "
                     "other users can read it", f"`chmod 600 {db}`")
    return Check(name, True, f"{data_dir} exists, owner-only ({mode:04o})")


def check_writable(data_dir: Path) -> Check:
    name = "writable"
    if not data_dir.is_dir():
        base = _nearest_existing(data_dir)
        ok = base.is_dir() and os.access(base, os.W_OK | os.X_OK)
        return Check(name, ok, f"nothing to write yet; {base} "
                     + ("accepts the new directory" if ok else "does not accept it"),
                     None if ok else "see the data directory check")
    try:
        fd, probe = tempfile.mkstemp(prefix=".doctor-", dir=data_dir)
        os.close(fd)
        os.unlink(probe)
    except OSError as ex:
        return Check(name, False, f"cannot write in {data_dir}: {ex.strerror or ex}",
                     f"`chmod u+rwx {data_dir}`, remount it read-write, or point "
                     "OMEGA_STENOGRAPHER_DIR elsewhere")
    return Check(name, True, f"{data_dir} is writable")


def check_disk(data_dir: Path, minimum: int = MIN_FREE_BYTES) -> Check:
    base = _nearest_existing(data_dir)
    try:
        free = shutil.disk_usage(base if base.is_dir() else base.parent).free
    except OSError as ex:
        return Check("free disk", False, f"cannot read free space at {base}: {ex}",
                     "point OMEGA_STENOGRAPHER_DIR at a mounted, readable volume")
    ok = free >= minimum
    detail = f"{free / 2**30:.1f} GiB free at {base} (needs at least {minimum // 2**20} MiB)"
    return Check("free disk", ok, detail,
                 None if ok else "free space on that volume or point OMEGA_STENOGRAPHER_DIR "
                 "at another one")


def check_store(data_dir: Path) -> list[Check]:
    """Two checks: the store opens; its migrations match this build."""
    from store.migrations import RECORDED, SCHEMA_VERSION
    from store.probe import store_migrations

    db = data_dir / "steno.db"
    if not db.exists():
        return [Check("store", True, f"no store yet at {db}; it is created on first use"),
                Check("migrations", True, f"a new store starts at schema version "
                      f"{SCHEMA_VERSION}")]
    try:
        applied = store_migrations(db)
    except Exception as ex:  # apsw.Error: locked, not a database, corrupt
        return [Check("store", False, f"{db} does not open: {ex}",
                      "if another process holds a lock, retry; if the file is damaged, "
                      "move it aside (keep a copy) and restore it from a backup"),
                Check("migrations", False, "unknown: the store does not open",
                      "fix the store check first")]
    opened = Check("store", True, f"{db} opens ({db.stat().st_size:,} bytes)")
    version = max((m.version for m in applied), default=0)
    known = RECORDED["sqlite"]
    strangers = [m for m in applied if known.get(m.version) != m.name]
    if strangers:
        return [opened, Check("migrations", False, "the store records migrations this "
                              f"build does not know: {', '.join(m.name for m in strangers)}",
                              "upgrade omega-stenographer-mcp to the version that wrote it")]
    if version < SCHEMA_VERSION:
        return [opened, Check("migrations", False, f"schema version {version}; this build "
                              f"expects {SCHEMA_VERSION}",
                              "run any command that opens the store (e.g. `stenographer "
                              "status`) to apply the missing migrations")]
    return [opened, Check("migrations", True, f"schema version {version} is current")]


# --- PostgreSQL (STENO_DATABASE_URL) ---------------------------------------------------------

PG_CHECKS = ("database", "server version", "vector extension", "migrations")
SELECT_VECTOR = """
SELECT default_version, installed_version FROM pg_available_extensions WHERE name = 'vector'"""
SELECT_SUPERUSER = "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"
SELECT_MIGRATIONS = "SELECT version, name FROM schema_migrations ORDER BY version"


def _hide(text: str, url: str) -> str:
    """``text`` without the URL's password (in the user part or a ``password=`` query)."""
    from urllib.parse import parse_qs, urlsplit

    parts = urlsplit(url)
    secrets = {parts.password} | set(parse_qs(parts.query).get("password", []))
    for secret in sorted(filter(None, secrets), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def _location(url: str) -> str:
    from store.postgres.db import redact_url

    return _hide(redact_url(url), url)


def _connect_fix(message: str, location: str, timeout: float) -> str:
    if "password authentication failed" in message or "no password supplied" in message:
        return ("check the user and password: in STENO_DATABASE_URL (or the file "
                "STENO_DATABASE_URL_FILE names), ~/.pgpass or PGPASSWORD")
    if "does not exist" in message and "database" in message:
        return ("create the database first, e.g. `createdb` with the host, port and name "
                f"of {location}")
    if "timeout" in message.lower():
        return (f"nothing answered within {timeout:g} s: check the host and port, and that "
                "no firewall drops the connection")
    return ("start the server, or correct the host and port in STENO_DATABASE_URL; the server "
            "must accept TCP connections from this host (listen_addresses, pg_hba.conf)")


def _version(text: str | None) -> tuple[int, ...]:
    return tuple(int(p) for p in (text or "0").split(".")[:2] if p.isdigit())


def check_postgres(url: str, timeout: float = PG_CONNECT_TIMEOUT_S) -> list[Check]:
    """Four checks: the connection, the server version, pgvector, the schema version."""
    location = _location(url)
    not_checked = [Check(n, False, "not checked: no connection to the database",
                         "fix the database check first") for n in PG_CHECKS[1:]]
    try:
        import psycopg
    except ImportError:
        return [Check("database", False, "STENO_DATABASE_URL names PostgreSQL but psycopg "
                      "is not installed", "pip install 'omega-stenographer-mcp[postgres]'"),
                *not_checked]
    try:
        # libpq's connect_timeout is whole seconds, at least 2
        conn = psycopg.connect(url, connect_timeout=max(2, round(timeout)), autocommit=True)
    except Exception as ex:  # psycopg.Error, or a URL libpq cannot parse
        message = _hide(" ".join(str(ex).split()), url)
        return [Check("database", False, f"cannot connect to {location}: {message}",
                      _connect_fix(message, location, max(2, round(timeout)))), *not_checked]
    with conn:
        checks = [Check("database", True, f"connected to {location}")]
        major, full = conn.info.server_version // 10000, conn.info.parameter_status(
            "server_version") or str(conn.info.server_version)
        ok = major >= MIN_POSTGRES
        checks.append(Check("server version", ok, f"PostgreSQL {full}"
                            + ("" if ok else f" (needs {MIN_POSTGRES} or later)"),
                            None if ok else f"upgrade the server to PostgreSQL {MIN_POSTGRES} "
                            "or later (pg_upgrade, or a dump and restore)"))
        row = conn.execute(SELECT_VECTOR).fetchone()
        superuser = bool((conn.execute(SELECT_SUPERUSER).fetchone() or [False])[0])
        checks.append(_vector_check(row, superuser))
        has_schema = conn.execute("SELECT to_regclass('schema_migrations')").fetchone()
        applied = ([(int(v), str(n)) for v, n in conn.execute(SELECT_MIGRATIONS)]
                   if has_schema and has_schema[0] is not None else None)
    checks.append(_schema_check(applied))
    return checks


def _vector_check(row: Any, superuser: bool) -> Check:
    name = "vector extension"
    install = ("install pgvector 0.7 or later on the database server (e.g. the "
               "postgresql-NN-pgvector package, or the pgvector/pgvector Docker image)")
    if row is None:
        return Check(name, False, "pgvector is not available on the server", install)
    default, installed = row
    version = installed or default
    if _version(version) < MIN_PGVECTOR:
        return Check(name, False, f"pgvector {version} is too old (halfvec needs 0.7 or "
                     "later)", install if not installed else
                     "upgrade it on the server, then `ALTER EXTENSION vector UPDATE;`")
    if installed:
        return Check(name, True, f"pgvector {installed} is installed in the database")
    if superuser:
        return Check(name, True, f"pgvector {default} is available; the first server start "
                     "creates it in the database")
    return Check(name, False, f"pgvector {default} is available but not created in the "
                 "database, and this role may not create it (pgvector needs a superuser)",
                 "as a superuser, in that database: `CREATE EXTENSION vector;`")


def _schema_check(applied: list[tuple[int, str]] | None) -> Check:
    from store.migrations import RECORDED

    known = RECORDED["postgresql"]
    if applied is None:
        return Check("migrations", True, "no schema yet; the first server start creates it "
                     f"(schema version {len(known)})")
    strangers = [n for v, n in applied if known.get(v) != n]
    if strangers:
        return Check("migrations", False, "the database records migrations this build "
                     f"does not know: {', '.join(strangers)}",
                     "upgrade omega-stenographer-mcp to the version that wrote them")
    version = max((v for v, _ in applied), default=0)
    if version < len(known):
        return Check("migrations", False, f"schema version {version}; this build expects "
                     f"{len(known)}", "run any command that opens the store (e.g. "
                     "`stenographer status`) to apply the missing migrations")
    return Check("migrations", True, f"schema version {version} is current")


# --- the stages -------------------------------------------------------------------------------

class ChecksWrites(TypedDict):
    checks: list[Check]


class SettingsCheckWrites(TypedDict):
    checks: list[Check]
    data_dir: Path | None
    database_url: SecretStr | None


class SetupReport(TypedDict):
    ok: bool
    checks: list[Check]


class SetupReportWrites(TypedDict):
    reply: SetupReport


@node
def python_check() -> ChecksWrites:
    return {"checks": [check_python()]}


@node
def settings_check(request: Any) -> SettingsCheckWrites:
    """The settings as the edge read them: ``request`` holds ``data_dir`` and
    ``database_url``, or ``invalid`` (why the environment's settings are not valid)."""
    if request.get("invalid"):
        return {"checks": [Check("settings", False, str(request["invalid"]),
                                 "correct or unset that environment variable")],
                "data_dir": None, "database_url": None}
    data_dir = Path(request["data_dir"])
    return {"checks": [Check("settings", True, "environment settings are valid; data in "
                             f"{data_dir}")],
            "data_dir": data_dir, "database_url": request.get("database_url")}


@node
def sqlite_check() -> ChecksWrites:
    return {"checks": [check_sqlite()]}


@node
def sqlite_vec_check() -> ChecksWrites:
    return {"checks": [check_sqlite_vec()]}


@node
def settings_unchecked() -> ChecksWrites:
    """What cannot be checked without valid settings."""
    return {"checks": [Check(name, False, "not checked: the settings are invalid",
                             "fix the settings check first")
                       for name in ("data directory", "writable", "free disk", "store",
                                    "migrations")]}


@node
def data_dir_check(data_dir: Path) -> ChecksWrites:
    return {"checks": [check_data_dir(data_dir)]}


@node
def writable_check(data_dir: Path) -> ChecksWrites:
    return {"checks": [check_writable(data_dir)]}


@node
def disk_check(data_dir: Path) -> ChecksWrites:
    return {"checks": [check_disk(data_dir)]}


@node
def store_checks(data_dir: Path) -> ChecksWrites:
    return {"checks": check_store(data_dir)}


@node
def postgres_checks(database_url: SecretStr) -> ChecksWrites:
    return {"checks": check_postgres(database_url.get_secret_value())}


@node
def setup_report(checks: list[Check]) -> SetupReportWrites:
    return {"reply": {"ok": all(c.ok for c in checks), "checks": list(checks)}}
