"""stenographer_capture_status through the real MCP SDK client (in memory) after a capture
pass: files, offsets, last success, last error and counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from stenographer.app import open_app
from stenographer.capture import Capturer, discover
from stenographer.settings import Settings
from tests.capture.transcripts import ClaudeTranscript, CodexTranscript
from tests.e2e.conftest import memory_conn
from tests.e2e.support import STATUS

pytestmark = pytest.mark.anyio


async def test_capture_status_tool_reports_files_offsets_and_errors(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    data, claude_dir, codex_dir = tmp_path / "data", tmp_path / "claude", tmp_path / "codex"
    claude, codex = ClaudeTranscript(claude_dir), CodexTranscript(codex_dir)
    claude.append(claude.user("first"), "}{\n", claude.assistant("second"))
    codex.append(codex.meta(), codex.user("third"))
    app = open_app(Settings(data_dir=data))
    try:
        Capturer(app).run_pass(discover(("claude-code", "codex"), claude_dir, codex_dir))
    finally:
        app.close()

    async with memory_conn("auto", data, monkeypatch, {}) as conn:
        result = await conn.ok(STATUS)
    assert result.structured_content is not None
    status = result.structured_content["status"]
    capture = status["capture"]
    assert status["store"]["exchanges"] == 3
    assert (capture["files"], capture["captured"], capture["skipped"]) == (2, 3, 1)
    assert capture["enabled"] is True and capture["watcher"] is None
    by_path = {s["path"]: s for s in capture["sources"]}
    assert set(by_path) == {str(claude.path), str(codex.path)}
    for path, source in by_path.items():
        assert source["offset"] == source["size"] == Path(path).stat().st_size
        assert source["last_success_at"].endswith("Z")
    assert "line 2" in by_path[str(claude.path)]["last_error"]
    assert capture["last_error"]["file"] == str(claude.path)
    text = result.content[0].text  # type: ignore[union-attr]
    assert "capture: no watcher running; 2 files, 3 turns captured" in text
