"""Every command: `--help`, the `--json` shape and the exit codes scripts rely on."""

from __future__ import annotations

from pathlib import Path

import pytest

from stenographer.cli import build_parser
from tests.cli.conftest import ALPHA, BETA, run_cli

COMMANDS = ["serve", "inspect", "demo", "search", "brief", "guard", "sessions", "stats",
            "trace", "status", "config", "doctor", "capture", "hook", "audit", "forget",
            "graphrag", "export", "import", "sync", "bus", "migrate", "graphs", "index"]
READ_COMMANDS = ["search", "brief", "guard", "sessions", "stats", "trace", "status", "doctor",
                 "audit"]


def test_every_command_is_listed() -> None:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert sorted(sub.choices) == sorted(COMMANDS)  # type: ignore[arg-type]


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_everywhere_documents_exit_codes(fresh: Path, command: str | None) -> None:
    result = run_cli(fresh, *([command] if command else []), "--help")
    assert result.code == 0, result.err
    assert "exit codes:" in result.out and "1  nothing found" in result.out
    assert not fresh.exists()  # --help touches nothing


@pytest.mark.parametrize("command", READ_COMMANDS)
def test_every_read_command_has_json(command: str) -> None:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    parser = sub.choices[command]  # type: ignore[index]
    assert any("--json" in a.option_strings for a in parser._actions)


def test_search_json_and_exit_codes(seeded: Path) -> None:
    result = run_cli(seeded, "search", "build cache", "--session", ALPHA, "--json")
    assert result.code == 0, result.err
    page = result.json()
    assert set(page) == {"hits", "total", "next_cursor", "notes", "run_id"}
    assert page["hits"] and page["total"] >= len(page["hits"])
    hit = page["hits"][0]
    assert {"exchange_id", "session_id", "role", "created_at", "score", "snippet",
            "decisions", "blockers", "brief_id"} <= set(hit)
    assert hit["session_id"] == ALPHA

    nothing = run_cli(seeded, "search", "xylophone", "--session", ALPHA, "--mode", "keyword",
                      "--json")
    assert nothing.code == 1, nothing.err
    assert nothing.json()["hits"] == []

    bad = run_cli(seeded, "search", "cache", "--session", ALPHA, "--limit", "0", "--json")
    assert bad.code == 2
    assert bad.json()["error"]["code"] == "steno.invalid_input"
    assert "limit" in bad.err

    usage = run_cli(seeded, "search", "cache")  # neither --session nor --all
    assert usage.code == 2 and "--session" in usage.err


def test_brief_json_and_exit_codes(seeded: Path) -> None:
    result = run_cli(seeded, "brief", ALPHA, "--json")
    assert result.code == 0, result.err
    notes = result.json()
    assert set(notes) == {"session_id", "found", "markdown", "run_id"}
    assert notes["found"] is True and "pipeline shipped" in notes["markdown"]

    unknown = run_cli(seeded, "brief", "no-such-session", "--json")
    assert unknown.code == 1
    assert unknown.json()["found"] is False


def test_guard_json(seeded: Path) -> None:
    result = run_cli(seeded, "guard", ALPHA, "--query", "docker build cache", "--json")
    assert result.code == 0, result.err
    guard = result.json()
    assert set(guard) == {"session_id", "found", "markdown", "brief_ids", "vector_only",
                          "live_exchange_ids", "run_id"}
    assert guard["brief_ids"], "ten turns with STENO_TURN_LIMIT=8 make a brief"
    assert run_cli(seeded, "guard", "no-such-session").code == 1


def test_sessions_json_newest_first(seeded: Path) -> None:
    result = run_cli(seeded, "sessions", "--json")
    assert result.code == 0, result.err
    listing = result.json()
    assert set(listing) == {"sessions", "total", "offset", "run_id"}
    assert listing["total"] == 2 and listing["offset"] == 0
    beta, alpha = listing["sessions"]
    assert beta["session_id"] == BETA and alpha["session_id"] == ALPHA
    assert set(alpha) == {"session_id", "turns", "uncompressed", "briefs", "milestones",
                          "created_at", "last_at"}
    assert alpha["turns"] == 10 and alpha["briefs"] >= 1 and alpha["milestones"] == 1
    assert alpha["last_at"] == "2026-01-01T10:09:00Z"

    page = run_cli(seeded, "sessions", "--limit", "1", "--offset", "1")
    assert page.code == 0 and ALPHA in page.out and "sessions 2-2 of 2" in page.out


def test_sessions_empty_store_exits_1(fresh: Path) -> None:
    result = run_cli(fresh, "sessions", "--json")
    assert result.code == 1, result.err
    assert result.json()["sessions"] == []


def test_stats_json(seeded: Path) -> None:
    result = run_cli(seeded, "stats", "--json")
    assert result.code == 0, result.err
    stats = result.json()
    assert {"path", "counts", "size", "tables", "dbstat", "schema", "run_id"} <= set(stats)
    assert stats["counts"]["sessions"] == 2 and stats["counts"]["exchanges"] == 12
    assert stats["size"]["database_bytes"] > 0
    assert stats["schema"]["current"] is True
    assert stats["schema"]["version"] == stats["schema"]["expected"]
    if stats["dbstat"]:
        # Shadow tables of FTS5 and vec0 are folded into their virtual table.
        assert {"exchanges", "exchanges_fts", "exchange_vectors"} <= set(stats["tables"])
        assert not any(name.startswith("exchanges_fts_") for name in stats["tables"])
    text = run_cli(seeded, "stats")
    assert text.code == 0 and "schema version" in text.out


def test_trace_list_and_show(seeded: Path) -> None:
    listed = run_cli(seeded, "trace", "list", "--graph", "ingest", "--limit", "3", "--json")
    assert listed.code == 0, listed.err
    runs = listed.json()["runs"]
    assert len(runs) == 3 and all(r["graph"] == "ingest" for r in runs)
    assert {"run_id", "graph", "status", "started_at", "duration_ms"} <= set(runs[0])

    run_id = runs[0]["run_id"]
    for args in (["trace", "show", run_id], ["trace", run_id]):
        shown = run_cli(seeded, *args, "--json")
        assert shown.code == 0, shown.err
        trace = shown.json()
        assert trace["run_id"] == run_id and trace["stages"]
        text = run_cli(seeded, *args)
        assert text.code == 0 and f"run {run_id}" in text.out
        assert "\x1b[" not in text.out  # no colour when stdout is not a terminal

    assert run_cli(seeded, "trace").code == 0  # bare `trace` still lists
    assert run_cli(seeded, "trace", "show", "0" * 32).code == 2  # unknown run
    assert run_cli(seeded, "trace", "show").code == 2
    assert run_cli(seeded, "trace", "a", "b").code == 2


def test_trace_list_empty_store_exits_1(fresh: Path) -> None:
    result = run_cli(fresh, "trace", "--json")
    assert result.code == 1, result.err
    assert result.json() == {"runs": []}


def test_status_json(seeded: Path) -> None:
    result = run_cli(seeded, "status", "--json")
    assert result.code == 0, result.err
    assert result.json()["store"]["exchanges"] == 12


def test_unusable_store_exits_2(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o700)
    (data_dir / "steno.db").write_bytes(b"this is not a database" * 200)
    result = run_cli(data_dir, "status", "--json")
    assert result.code == 2 and "Traceback" not in result.err
    error = result.json()["error"]
    assert error["code"] == "steno.store.corrupt"
    assert error["message"].startswith(
        f"the store {data_dir / 'steno.db'} is damaged (file is not a database): the store "
        "could not be opened. Run `stenographer audit` and `stenographer doctor`; restore "
        "it from a backup if they fail."), error
    assert result.err == f"stenographer: {error['message']}\n"


def test_data_dir_that_cannot_be_created_exits_2(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    result = run_cli(blocker / "data", "sessions", "--json")
    assert result.code == 2
    assert "error" in result.json()


def test_invalid_setting_exits_2(seeded: Path) -> None:
    result = run_cli(seeded, "sessions", STENO_TURN_LIMIT="many")
    assert result.code == 2 and "STENO_TURN_LIMIT" in result.err


def test_serve_address_needs_http(fresh: Path) -> None:
    result = run_cli(fresh, "serve", "--port", "9000")
    assert result.code == 2 and "--http" in result.err
    assert run_cli(fresh, "serve", "--http", "--port", "70000").code == 2


def test_inspector_refuses_a_non_loopback_address(fresh: Path) -> None:
    result = run_cli(fresh, "inspect", "--host", "0.0.0.0", "--port", "0")
    assert result.code == 2 and "loopback" in result.err
