"""Capture settings: the hosts' own variables move the defaults; bad values say what is
valid; docs/settings.md documents every capture setting, docs/capture.md the commands."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from stenographer.settings import Settings, SettingsError

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_defaults_follow_the_hosts_own_variables(tmp_path: Path):
    home = Settings.from_env({})
    assert home.capture_claude_dir == Path("~/.claude/projects").expanduser()
    assert home.capture_codex_dir == Path("~/.codex/sessions").expanduser()
    assert home.capture_sources == ("claude-code", "codex") and home.capture_interval == 1.0
    moved = Settings.from_env({"CLAUDE_CONFIG_DIR": str(tmp_path / "cc"),
                               "CODEX_HOME": str(tmp_path / "cx")})
    assert moved.capture_claude_dir == tmp_path / "cc" / "projects"
    assert moved.capture_codex_dir == tmp_path / "cx" / "sessions"
    explicit = Settings.from_env({"CODEX_HOME": str(tmp_path / "cx"),
                                  "STENO_CAPTURE_CODEX_DIR": str(tmp_path / "s"),
                                  "STENO_CAPTURE_SOURCES": " Codex ,codex",
                                  "STENO_CAPTURE_INTERVAL": "0.25"})
    assert explicit.capture_codex_dir == tmp_path / "s"
    assert explicit.capture_sources == ("codex",) and explicit.capture_interval == 0.25


@pytest.mark.parametrize(("env", "message"), [
    ({"STENO_CAPTURE_SOURCES": "claude-code,cursor"}, "'cursor' is not valid"),
    ({"STENO_CAPTURE_INTERVAL": "0"}, "out of range"),
    ({"STENO_CAPTURE_INTERVAL": "soon"}, "not a number"),
])
def test_bad_capture_settings_say_what_is_valid(env: dict[str, str], message: str):
    with pytest.raises(SettingsError, match=message):
        Settings.from_env(env)


def test_the_docs_document_every_capture_setting():
    source = (REPO_ROOT / "stenographer" / "settings.py").read_text(encoding="utf-8")
    settings_doc = (REPO_ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    capture_doc = (REPO_ROOT / "docs" / "capture.md").read_text(encoding="utf-8")
    names = set(re.findall(r'"(STENO_CAPTURE_[A-Z_]+)"', source))
    assert names == {"STENO_CAPTURE_CLAUDE_DIR", "STENO_CAPTURE_CODEX_DIR",
                     "STENO_CAPTURE_SOURCES", "STENO_CAPTURE_INTERVAL"}
    assert all(f"`{name}`" in settings_doc for name in names)
    assert "stenographer capture --once" in capture_doc and "stenographer hook" in capture_doc


def test_the_briefing_budget_is_a_setting_with_a_range():
    assert Settings.from_env({}).briefing_chars == 6_000
    assert Settings.from_env({"STENO_BRIEFING_CHARS": "2500"}).briefing_chars == 2_500
    for bad in ("999", "10001", "lots"):
        with pytest.raises(SettingsError, match="STENO_BRIEFING_CHARS"):
            Settings.from_env({"STENO_BRIEFING_CHARS": bad})
    settings_doc = (REPO_ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    capture_doc = (REPO_ROOT / "docs" / "capture.md").read_text(encoding="utf-8")
    assert "`STENO_BRIEFING_CHARS`" in settings_doc
    assert "config claude-code --hooks" in capture_doc
