"""`stenographer bus publish`, its settings and README, as
subprocesses on a real store and a real bus file."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from stenographer.settings import (
    DEFAULT_BUS_BATCH,
    DEFAULT_BUS_EXCERPT_CHARS,
    DEFAULT_BUS_INTERVAL,
    Settings,
    SettingsError,
)
from tests.busfile import make_bus
from tests.cli.conftest import run_cli, seed
from tests.conftest import REPO_ROOT


def test_publish_settings_have_defaults_and_ranges() -> None:
    default = Settings.from_env({})
    assert (default.bus_publish, default.bus_batch, default.bus_interval,
            default.bus_excerpt_chars) == (True, DEFAULT_BUS_BATCH, DEFAULT_BUS_INTERVAL,
                                           DEFAULT_BUS_EXCERPT_CHARS)
    assert Settings.from_env({"STENO_BUS_PUBLISH": "off"}).bus_publish is False
    assert Settings.from_env({"STENO_BUS_EXCERPT_CHARS": "0"}).bus_excerpt_chars == 0
    for name, bad in (("STENO_BUS_BATCH", "0"), ("STENO_BUS_INTERVAL", "0.001"),
                      ("STENO_BUS_PUBLISH_TIMEOUT_MS", "70000"),
                      ("STENO_BUS_EXCERPT_CHARS", "-1"), ("STENO_BUS_PUBLISH", "maybe")):
        with pytest.raises(SettingsError, match=name):
            Settings.from_env({name: bad})


def count_events(path: Path) -> int:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        row = conn.execute("SELECT count(*), count(DISTINCT json_extract(payload, '$.key')) "
                           "FROM events WHERE event_type = 'STENO_EXCHANGE'").fetchone()
    finally:
        conn.close()
    assert row is not None and row[0] == row[1]
    return int(row[0])


def test_publish_command_delivers_once_and_reports_an_unusable_bus(tmp_path: Path) -> None:
    data, shared = tmp_path / "data", tmp_path / "shared"
    seed(data)
    missing = run_cli(data, "bus", "publish", VERITAS_SHARED_DIR=str(shared))
    assert missing.code == 2 and "the bus is missing" in missing.err
    assert not shared.exists()  # never created by us

    path = make_bus(shared)
    first = run_cli(data, "bus", "publish", "--batch", "4", "--json",
                    VERITAS_SHARED_DIR=str(shared))
    assert first.code == 0, first.err
    outcome = first.json()
    assert outcome["ok"] and outcome["published"] == count_events(path) > 4
    assert outcome["batches"] > 1 and outcome["duplicates"] == 0
    again = run_cli(data, "bus", "publish", VERITAS_SHARED_DIR=str(shared))
    assert again.code == 0 and "0 batches, 0 new events" in again.out

    status = run_cli(data, "status", "--json", VERITAS_SHARED_DIR=str(shared)).json()
    publishing = status["bus"]["publishing"]
    assert publishing["pending"] == 0 and publishing["delivered"] == outcome["published"]
    assert "the bus is missing" in publishing["last_error"]  # kept, with its time

    off = run_cli(data, "bus", "publish", VERITAS_SHARED_DIR="off")
    assert off.code == 2 and "VERITAS_SHARED_DIR" in off.err
    bad = run_cli(data, "bus", "publish", "--batch", "0", VERITAS_SHARED_DIR=str(shared))
    assert bad.code == 2 and "out of range" in bad.err


def test_the_docs_document_publishing() -> None:
    readme = "".join((REPO_ROOT / "docs" / name).read_text(encoding="utf-8")
                     for name in ("bus.md", "settings.md"))
    for name in ("STENO_EXCHANGE", "stenographer bus publish", "STENO_BUS_PUBLISH",
                 "STENO_BUS_BATCH", "STENO_BUS_INTERVAL", "STENO_BUS_PUBLISH_TIMEOUT_MS",
                 "STENO_BUS_EXCERPT_CHARS", "outbox:bus"):
        assert name in readme, name
