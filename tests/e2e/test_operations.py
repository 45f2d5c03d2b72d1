"""The operation table (stenographer/operations.py) against the real surfaces: every MCP
tool the server lists and every command the parser knows maps to exactly one graph
(bar the hosts and printers that run none), `stenographer graphs --json` lists every
graph with its stages, edges and callers, and a real call of each tool (through the SDK
client) and of each command that needs no peer runs the graph the table names."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import stenographer.operations
from stenographer.cli import build_parser
from stenographer.cli import run as run_command
from stenographer.doctor import run_doctor
from stenographer.operations import COMMANDS, NO_GRAPH, TOOLS, definitions, graph_table
from stenographer.settings import Settings
from tests.e2e.conftest import memory_conn
from tests.e2e.support import (
    AUDIT,
    FORGET,
    GRAPH_QUERY,
    GUARD,
    INGEST,
    MILESTONE,
    NOTES,
    SEARCH,
    STATUS,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
GRAPHS = {d["name"] for d in definitions()}


def command_words(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()
                  ) -> Iterator[str]:
    """Every command as typed: "search", and for a group its subcommands ("sync push")."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                words = (*prefix, name)
                nested = [a for a in sub._actions if isinstance(a, argparse._SubParsersAction)]
                if nested:
                    yield from command_words(sub, words)
                else:
                    yield " ".join(words)


def test_every_command_maps_to_one_graph_or_says_why_not() -> None:
    commands = set(command_words(build_parser()))
    assert set(COMMANDS) | set(NO_GRAPH) == commands
    assert not set(COMMANDS) & set(NO_GRAPH)  # each in exactly one of them
    # Only the hosts and the printers run no graph of their own: no other exception.
    assert set(NO_GRAPH) == {"serve", "inspect", "demo", "config"}
    assert not hasattr(stenographer.operations, "NOT_ONE_GRAPH")
    assert (COMMANDS["hook"], COMMANDS["doctor"]) == ("hook", "doctor")
    assert set(COMMANDS.values()) <= GRAPHS


@pytest.mark.anyio
async def test_every_tool_runs_the_graph_the_table_names(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with memory_conn("auto", tmp_path, monkeypatch, {}) as conn:
        listed = {tool.name for tool in (await conn.client.list_tools()).tools}
        assert listed == set(TOOLS)
        assert set(TOOLS.values()) <= GRAPHS
        first = await conn.ok(INGEST, {"role": "user", "content": "we chose SQLite for the "
                                       "store", "session_id": "ops"})
        second = await conn.ok(INGEST, {"role": "user", "content": "a turn to forget",
                                        "session_id": "ops"})
        ids = [r.structured_content["exchange_id"]  # type: ignore[index]
               for r in (first, second)]
        calls: dict[str, dict[str, Any]] = {
            INGEST: {"role": "assistant", "content": "noted", "session_id": "ops"},
            NOTES: {"session_id": "ops"},
            GUARD: {"session_id": "ops", "query": "SQLite"},
            MILESTONE: {"session_id": "ops", "exchange_id": ids[0], "label": "chosen"},
            SEARCH: {"query": "SQLite", "session_id": "ops"},
            STATUS: {},
            AUDIT: {"session_id": "ops"},
            FORGET: {"confirm": True, "exchange_ids": [ids[1]]},
            GRAPH_QUERY: {"query": "SQLite", "cross_session": True},
        }
        assert set(calls) == set(TOOLS)
        for tool, arguments in calls.items():
            result = await conn.ok(tool, arguments)
            trace = result.structured_content["trace"]  # type: ignore[index]
            assert trace["graph"] == TOOLS[tool], tool


def _last_run(data_dir: Path) -> str:
    """The graph of the newest stored run."""
    from stenographer.app import open_app

    app = open_app(Settings(data_dir=data_dir))
    try:
        out, _ = app.run("trace", {"limit": 1})
    finally:
        app.close()
    return str(out["reply"]["runs"][0]["graph"])


def test_each_command_runs_the_graph_the_table_names(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """In this process, through the parser and the command functions; the store's newest
    run after each command names the graph it ran."""
    data_dir = tmp_path / "data"
    monkeypatch.setenv("OMEGA_STENOGRAPHER_DIR", str(data_dir))
    monkeypatch.setenv("VERITAS_SHARED_DIR", str(tmp_path / "bus"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    from stenographer.app import open_app

    app = open_app(Settings(data_dir=data_dir))
    try:
        for n in range(3):
            out, _ = app.run("ingest", {"role": "user", "session_id": "ops",
                                        "content": f"we chose SQLite for the store {n}"})
        last_id = out["reply"]["exchange_id"]
    finally:
        app.close()
    bundle, graph_file = tmp_path / "ops.zst", tmp_path / "graph.json"
    transcript = tmp_path / "claude" / "projects" / "p" / "s.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_text('{"type": "user", "uuid": "u1", "sessionId": "s", "message": '
                          '{"role": "user", "content": "captured words"}}\n', encoding="utf-8")
    stop = json.dumps({"hook_event_name": "Stop", "session_id": "s",
                       "transcript_path": str(transcript)})
    start = json.dumps({"hook_event_name": "SessionStart", "session_id": "ops",
                        "source": "compact"})
    runs = {
        "search": ["search", "SQLite", "--session", "ops"],
        "brief": ["brief", "ops"],
        "guard": ["guard", "ops", "--query", "SQLite"],
        "sessions": ["sessions"],
        "stats": ["stats"],
        "trace": ["trace", "list"],
        "status": ["status"],
        "audit": ["audit"],
        "forget": ["forget", "--id", str(last_id), "--yes", "--no-vacuum"],
        "export": ["export", str(bundle)],
        "import": ["import", str(bundle)],
        "sync status": ["sync", "status"],
        "graphrag extract": ["graphrag", "extract"],
        "graphrag stats": ["graphrag", "stats"],
        "graphrag communities": ["graphrag", "communities"],
        "graphrag query": ["graphrag", "query", "SQLite", "--all"],
        "graphrag export": ["graphrag", "export", "--format", "json", "-o", str(graph_file)],
        "graphrag reset": ["graphrag", "reset", "--yes"],
        "index rebuild": ["index", "rebuild"],
        "capture": ["capture", "--once"],  # no transcripts: a pass over no files
    }
    # Not run here: sync push/pull need a peer over HTTP, bus publish a bus with
    # subscribers, migrate a second store (each has its own tests); doctor and graphs run
    # without a store, so their traces are returned, not stored (below).
    assert set(COMMANDS) - set(runs) - {"hook"} == {
        "sync push", "sync pull", "bus publish", "migrate", "doctor", "graphs"}
    parser = build_parser()
    for command, argv in runs.items():
        code = run_command(parser.parse_args(argv))
        capsys.readouterr()
        assert code in (0, 1), (command, code)
        assert _last_run(data_dir) == COMMANDS[command], command
    # A host's hook runs the one hook graph whatever the event: capture or briefing.
    for payload in (stop, start):
        assert run_command(parser.parse_args(["hook", "claude-code", payload])) == 0
        assert capsys.readouterr().err == ""
        assert _last_run(data_dir) == COMMANDS["hook"], payload
    _, trace = run_doctor()
    assert trace["graph"] == COMMANDS["doctor"]
    reply, trace = graph_table()
    assert trace["graph"] == COMMANDS["graphs"]
    assert {g["graph"] for g in reply["graphs"]} == GRAPHS


def test_graphs_command_lists_every_graph_with_its_edges_and_callers(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "stenographer", "graphs", "--json"], cwd=REPO_ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT), "HOME": str(tmp_path),
             "OMEGA_STENOGRAPHER_DIR": str(tmp_path / "data")},
        capture_output=True, text=True, timeout=120, check=True)
    listed = {g["graph"]: g for g in json.loads(proc.stdout)["graphs"]}
    assert set(listed) == GRAPHS
    for definition in definitions():
        graph = listed[definition["name"]]
        assert [s["name"] for s in graph["stages"]] == list(definition["nodes"])
        assert len(graph["edges"]) == len(definition["edges"])
        assert len(graph["conditional_edges"]) == len(definition.get("conditional_edges", []))
        assert graph["tools"] == sorted(t for t, g in TOOLS.items() if g == graph["graph"])
        assert graph["commands"] == sorted(c for c, g in COMMANDS.items()
                                           if g == graph["graph"])
    assert listed["search"]["tools"] == ["stenographer_query_history"]
    assert listed["search"]["commands"] == ["search"]
    assert {"from": "validate", "condition": "wanted",
            "routes": {"one": "load", "list": "list"}} in listed["trace"]["conditional_edges"]
    text = subprocess.run(
        [sys.executable, "-m", "stenographer", "graphs"], cwd=REPO_ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT), "HOME": str(tmp_path)},
        capture_output=True, text=True, timeout=120, check=True).stdout
    assert "search  ←  stenographer_query_history, `search`" in text
