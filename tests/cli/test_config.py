"""`stenographer config CLIENT`: valid JSON in each host's documented shape, absolute
paths filled in."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from stenographer import client_config
from stenographer.client_config import CLIENTS, Launch, launch_command, paste_hint
from stenographer.client_config import client_config as make_config
from tests.cli.conftest import run_cli

SHAPES = {  # client -> (top-level key, whether the entry carries "type": "stdio")
    "claude-desktop": ("mcpServers", False),
    "cursor": ("mcpServers", False),
    "windsurf": ("mcpServers", False),
    "claude-code": ("mcpServers", True),  # the project-scope .mcp.json file
    "vscode": ("servers", True),
}


def _entry(document: dict[str, Any], client: str, name: str) -> dict[str, Any]:
    key, typed = SHAPES[client]
    assert list(document) == [key]
    assert list(document[key]) == [name]
    entry: dict[str, Any] = document[key][name]
    expected = {"command", "args", "env"} | ({"type"} if typed else set())
    assert set(entry) == expected
    if typed:
        assert entry["type"] == "stdio"
    assert isinstance(entry["args"], list) and all(isinstance(a, str) for a in entry["args"])
    assert all(isinstance(v, str) for v in entry["env"].values())
    return entry


def test_clients_cover_the_documented_hosts() -> None:
    assert set(CLIENTS) == set(SHAPES)


@pytest.mark.parametrize("client", sorted(SHAPES))
def test_config_prints_valid_json_in_the_client_shape(tmp_path: Path, client: str) -> None:
    data_dir = tmp_path / "memory"
    result = run_cli(tmp_path / "unused", "config", client, "--dir", str(data_dir),
                     "--name", "steno")
    assert result.code == 0, result.err
    entry = _entry(json.loads(result.out), client, "steno")
    assert Path(entry["command"]).is_absolute()
    assert Path(entry["command"]).exists()
    assert entry["env"]["OMEGA_STENOGRAPHER_DIR"] == str(data_dir)
    assert result.err.strip(), "where to paste it is printed on stderr"
    assert not data_dir.exists()  # printing a configuration creates nothing


def test_config_defaults_to_the_settings_data_dir(seeded: Path) -> None:
    result = run_cli(seeded, "config", "cursor")
    assert result.code == 0, result.err
    entry = _entry(json.loads(result.out), "cursor", "stenographer")
    assert entry["env"]["OMEGA_STENOGRAPHER_DIR"] == str(seeded)


def test_unknown_client_is_a_usage_error(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "config", "emacs")
    assert result.code == 2 and "claude-desktop" in result.err


def test_console_script_beside_the_interpreter_is_preferred(tmp_path: Path) -> None:
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python"
    python.write_text("")
    suffix = ".exe" if os.name == "nt" else ""
    script = bin_dir / f"omega-stenographer-mcp{suffix}"
    script.write_text("")
    launch = launch_command(tmp_path / "d", executable=str(python))
    assert launch == Launch(str(script), [], {"OMEGA_STENOGRAPHER_DIR": str(tmp_path / "d")})


def test_without_the_script_python_runs_the_module(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_config, "_installed", lambda: False)
    launch = launch_command(tmp_path / "d", executable=sys.executable)
    if Path(launch.command).name.startswith("omega-stenographer-mcp"):
        pytest.skip("this environment has the console script installed")
    assert launch.args == ["-m", "stenographer"]
    # A source checkout: the host must find the package through PYTHONPATH.
    assert (Path(launch.env["PYTHONPATH"]) / "stenographer" / "__init__.py").is_file()


def test_claude_code_hint_is_a_working_add_json_command(tmp_path: Path) -> None:
    launch = Launch("/opt/it's here/omega-stenographer-mcp", [],
                    {"OMEGA_STENOGRAPHER_DIR": str(tmp_path)})
    hint = paste_hint("claude-code", launch, "steno")
    match = re.search(r"claude mcp add-json steno '(.*)'$", hint)
    assert match, hint
    # Single quotes inside the JSON are shell-escaped as '\''.
    entry = json.loads(match.group(1).replace("'\\''", "'"))
    assert entry == make_config("claude-code", launch, "steno")["mcpServers"]["steno"]
