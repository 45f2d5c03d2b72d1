"""Settings, command line and documentation (docs/bus.md) of the coordination bus."""

from __future__ import annotations

from pathlib import Path

import pytest

from stenographer.settings import DEFAULT_BUS_TIMEOUT_MS, Settings, SettingsError
from tests.busfile import emit, make_bus
from tests.cli.conftest import run_cli
from tests.conftest import REPO_ROOT


def test_the_bus_is_in_the_shared_directory_or_off(tmp_path: Path) -> None:
    default = Settings.from_env({})
    assert default.bus_path == Path("~/.veritas-shared/coordination.sqlite").expanduser()
    assert default.bus_timeout_ms == DEFAULT_BUS_TIMEOUT_MS
    chosen = Settings.from_env({"VERITAS_SHARED_DIR": str(tmp_path / "shared")})
    assert chosen.bus_path == tmp_path / "shared" / "coordination.sqlite"
    for off in ("off", "OFF", "0", "false", "no"):
        assert Settings.from_env({"VERITAS_SHARED_DIR": off}).bus_path is None
    assert Settings(data_dir=tmp_path).bus_path is None  # built in code: no bus unless named
    assert Settings.from_env({"STENO_BUS_TIMEOUT_MS": "0"}).bus_timeout_ms == 0
    with pytest.raises(SettingsError, match=r"STENO_BUS_TIMEOUT_MS=5000 is out of range"):
        Settings.from_env({"STENO_BUS_TIMEOUT_MS": "5000"})


def test_status_command_reports_the_bus(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    emit(make_bus(shared), "some-task")
    result = run_cli(tmp_path / "data", "status", "--json", VERITAS_SHARED_DIR=str(shared))
    assert result.code == 0, result.err
    bus = result.json()["bus"]
    assert bus["state"] == "ok" and bus["pending_shutdowns"] == 1
    assert bus["recorded_shutdowns"] == 0
    text = run_cli(tmp_path / "data", "status", VERITAS_SHARED_DIR="off")
    assert text.code == 0 and "bus: off" in text.out


def test_the_docs_document_the_bus() -> None:
    readme = "".join((REPO_ROOT / "docs" / name).read_text(encoding="utf-8")
                     for name in ("bus.md", "settings.md", "tools.md"))
    for name in ("VERITAS_SHARED_DIR", "STENO_BUS_TIMEOUT_MS", "CLAEG_TERMINAL_SHUTDOWN",
                 "TERMINAL_SHUTDOWN from <source> at <time>", "coordination.sqlite",
                 "| CLAEG terminal shutdown from <source> at <time> → #<id> (milestone)"):
        assert name in readme, name
