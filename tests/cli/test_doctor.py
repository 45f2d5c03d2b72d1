"""`stenographer doctor`: passes on a good set-up, names the problem on a broken one.

Tests run as root, where chmod does not stop writes; the broken data directory is
therefore a path under a regular FILE, which cannot be created by anyone (ENOTDIR).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from stenographer.doctor import check_python
from tests.cli.conftest import run_cli

NAMES = ["python", "settings", "sqlite", "sqlite-vec", "data directory", "writable",
         "free disk", "store", "migrations"]


def _checks(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    assert set(doc) == {"ok", "checks"}
    assert [c["name"] for c in doc["checks"]] == NAMES
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


@pytest.mark.parametrize(("version", "ok"), [((3, 10), False), ((3, 11), True),
                                             ((3, 13), True), ((3, 14), False)])
def test_python_versions(version: tuple[int, int], ok: bool) -> None:
    assert check_python(version).ok is ok
