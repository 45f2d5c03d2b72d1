"""`stenographer doctor`: passes on a good set-up, names the problem on a broken one.

Tests run as root, where chmod does not stop writes; the broken data directory is
therefore a path under a regular FILE, which cannot be created by anyone (ENOTDIR).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodes.evaluate_contracts.setup_checks import check_postgres, check_python
from stenographer.doctor import run_doctor
from store.backend import open_store
from store.migrations import POSTGRESQL_STEPS
from tests.cli.conftest import run_cli

NAMES = ["python", "settings", "sqlite", "sqlite-vec", "data directory", "writable",
         "free disk", "store", "migrations"]
PG_NAMES = [*NAMES[:-2], "database", "server version", "vector extension", "migrations"]
PASSWORD = "Pw-never-shown-42"


def _checks(doc: dict[str, Any], names: list[str] = NAMES) -> dict[str, dict[str, Any]]:
    assert set(doc) == {"ok", "checks"}
    assert [c["name"] for c in doc["checks"]] == names
    for check in doc["checks"]:
        assert set(check) == {"name", "ok", "detail", "fix"}
        assert check["ok"] or check["fix"], f"{check['name']} fails without a fix"
    return {c["name"]: c for c in doc["checks"]}


def test_doctor_passes_on_a_new_machine(fresh: Path) -> None:
    result = run_cli(fresh, "doctor", "--json")
    assert result.code == 0, result.out
    checks = _checks(result.json())
    assert result.json()["ok"] is True
    assert "created on first use" in checks["store"]["detail"]
    assert not fresh.exists(), "doctor creates nothing"


def test_doctor_passes_on_a_used_store(seeded: Path) -> None:
    result = run_cli(seeded, "doctor")
    assert result.code == 0, result.out
    assert result.out.count("✓") == len(NAMES) and "✗" not in result.out
    assert "All checks passed." in result.out


def test_data_dir_under_a_file_fails(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    result = run_cli(blocker / "data", "doctor", "--json")
    assert result.code == 2
    checks = _checks(result.json())
    assert checks["data directory"]["ok"] is False
    assert "is a file" in checks["data directory"]["detail"]
    assert "OMEGA_STENOGRAPHER_DIR" in checks["data directory"]["fix"]
    assert checks["python"]["ok"] and checks["sqlite"]["ok"]

    text = run_cli(blocker / "data", "doctor")
    assert text.code == 2
    assert "✗ data directory" in text.out and "fix:" in text.out


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
def test_data_dir_readable_by_others_fails(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    data_dir.chmod(0o755)
    result = run_cli(data_dir, "doctor", "--json")
    assert result.code == 2
    check = _checks(result.json())["data directory"]
    assert not check["ok"] and "0755" in check["detail"] and "chmod 700" in check["fix"]


def test_damaged_store_fails(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o700)
    db = data_dir / "steno.db"
    db.write_bytes(b"garbage" * 1000)
    db.chmod(0o600)
    result = run_cli(data_dir, "doctor", "--json")
    assert result.code == 2
    checks = _checks(result.json())
    assert not checks["store"]["ok"] and "does not open" in checks["store"]["detail"]
    assert not checks["migrations"]["ok"]
    assert checks["data directory"]["ok"] and checks["writable"]["ok"]


def test_invalid_setting_fails(fresh: Path) -> None:
    result = run_cli(fresh, "doctor", "--json", STENO_SYNCHRONOUS="sometimes")
    assert result.code == 2
    checks = _checks(result.json())
    assert not checks["settings"]["ok"] and "STENO_SYNCHRONOUS" in checks["settings"]["detail"]


def test_doctor_is_one_run_of_the_doctor_graph(fresh: Path, seeded: Path) -> None:
    """The checks are the stages of the ``doctor`` graph, run without a store: its trace
    is returned (nothing is stored, nothing created), and the progress callback sees
    every check as its stage ends."""
    seen: list[str] = []
    checks, trace = run_doctor({"OMEGA_STENOGRAPHER_DIR": str(fresh)},
                               on_check=lambda c: seen.append(c.name))
    assert trace["graph"] == "doctor" and trace["status"] == "Completed"
    assert [s["node"] for s in trace["stages"]] == [
        "python", "settings", "fts5", "vec_extension", "data_dir", "writable", "disk",
        "store", "reply"]
    assert [c.name for c in checks] == seen == NAMES
    assert not fresh.exists(), "doctor creates nothing"

    traces = seeded / "steno.db"
    before = traces.stat().st_mtime_ns
    _, trace = run_doctor({"OMEGA_STENOGRAPHER_DIR": str(seeded)})
    assert [s["node"] for s in trace["stages"]][-2:] == ["store", "reply"]
    assert traces.stat().st_mtime_ns == before, "the trace is not stored"

    _, trace = run_doctor({"OMEGA_STENOGRAPHER_DIR": str(fresh),
                           "STENO_SYNCHRONOUS": "sometimes"})
    assert [s["node"] for s in trace["stages"]] == [
        "python", "settings", "fts5", "vec_extension", "unchecked", "reply"]


@pytest.mark.parametrize(("version", "ok"), [((3, 10), False), ((3, 11), True),
                                             ((3, 13), True), ((3, 14), False)])
def test_python_versions(version: tuple[int, int], ok: bool) -> None:
    assert check_python(version).ok is ok


# --- PostgreSQL (STENO_DATABASE_URL) ---------------------------------------------------------

def _with_password(url: str) -> str:
    """The server trusts local connections, so any password is accepted: it is only
    there to be kept out of every message."""
    return url.replace("postgres@", f"postgres:{PASSWORD}@", 1)


def test_doctor_checks_the_database_version_pgvector_and_schema(
        fresh: Path, postgres_server: Any) -> None:
    url = _with_password(postgres_server.database())
    result = run_cli(fresh, "doctor", "--json", STENO_DATABASE_URL=url)
    assert result.code == 0, result.out
    checks = _checks(result.json(), PG_NAMES)
    assert checks["database"]["detail"].startswith("connected to postgresql://postgres:***@")
    assert checks["server version"]["detail"].startswith("PostgreSQL 18")
    assert "is available; the first server start creates it" in checks["vector extension"][
        "detail"]
    assert "no schema yet" in checks["migrations"]["detail"]
    assert not fresh.exists(), "doctor creates nothing"

    # creates the schema, and the data directory that records the database's store
    open_store(fresh / "steno.db", database_url=url).close()
    made = sorted(fresh.rglob("*"))
    text = run_cli(fresh, "doctor", STENO_DATABASE_URL=url)
    assert text.code == 0 and "All checks passed." in text.out
    assert "✓ vector extension: pgvector 0.8" in text.out and "is installed" in text.out
    assert f"✓ migrations: schema version {len(POSTGRESQL_STEPS)} is current" in text.out
    assert PASSWORD not in text.out + text.err + result.out + result.err
    assert sorted(fresh.rglob("*")) == made, "doctor creates nothing"


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_doctor_fails_clearly_where_no_database_listens(fresh: Path, closed_port: int) -> None:
    url = f"postgresql://steno:{PASSWORD}@127.0.0.1:{closed_port}/steno?password={PASSWORD}"
    result = run_cli(fresh, "doctor", "--json", STENO_DATABASE_URL=url)
    assert result.code == 2
    checks = _checks(result.json(), PG_NAMES)
    database = checks["database"]
    assert not database["ok"] and "Connection refused" in database["detail"]
    assert database["detail"].startswith(
        f"cannot connect to postgresql://steno:***@127.0.0.1:{closed_port}/steno?password=***")
    assert "start the server" in database["fix"]
    for name in ("server version", "vector extension", "migrations"):
        assert checks[name]["detail"] == "not checked: no connection to the database"
    assert checks["python"]["ok"] and checks["free disk"]["ok"]
    text = run_cli(fresh, "doctor", STENO_DATABASE_URL=url)
    assert text.code == 2 and "✗ database: cannot connect to" in text.out
    assert PASSWORD not in text.out + text.err + result.out + result.err


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port that accepts TCP connections and never answers (a stuck server)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield int(s.getsockname()[1])


def test_a_server_that_never_answers_fails_after_the_connect_timeout(
        silent_server: int) -> None:
    checks = check_postgres(f"postgresql://steno:{PASSWORD}@127.0.0.1:{silent_server}/steno",
                            timeout=2)
    database = checks[0]
    assert database.name == "database" and not database.ok
    assert "timeout expired" in database.detail and PASSWORD not in database.detail
    assert database.fix is not None and "nothing answered within 2 s" in database.fix
