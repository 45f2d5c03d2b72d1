"""An invalid setting stops every entry point at start with exit 2 and a message that
names the setting and what is valid, before anything is opened or served: the MCP
console script, `python -m stenographer`, `stenographer serve` (stdio and HTTP) and a
command. With valid settings the same entry points start."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from tests.cli.conftest import REPO_ROOT, TIMEOUT, cli_env
from tests.e2e.support import STATUS

MCP_SCRIPT = Path(sys.executable).with_name("omega-stenographer-mcp")
MODULE = [sys.executable, "-m", "stenographer"]
ENTRY_POINTS = {
    "console-script": [str(MCP_SCRIPT)],
    "python-m": MODULE,
    "serve": [*MODULE, "serve"],
    "serve-http": [*MODULE, "serve", "--http", "--port", "0"],
    "command": [*MODULE, "status"],
}
STDIO = ("python-m", "serve")  # the console script: test_the_console_script_serves_...
BAD = [
    ("STENO_TURN_LIMIT", "abc", "STENO_TURN_LIMIT='abc' is not a whole number (2..1000)"),
    ("STENO_TOP_K", "0", "STENO_TOP_K=0 is out of range (1..50)"),
    ("STENO_SYNCHRONOUS", "sometimes", "STENO_SYNCHRONOUS='sometimes' is not valid "
                                       "(normal, full)"),
]


def start(command: list[str], data_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Run an entry point whose standard input is an empty pipe (a stdio server that
    starts serves until that end of input, then exits 0)."""
    if command[0] == str(MCP_SCRIPT) and not MCP_SCRIPT.exists():
        pytest.skip(f"the console script is not installed next to {sys.executable}")
    return subprocess.run(command, input="", capture_output=True, text=True,
                          env=cli_env(data_dir, **env), cwd=REPO_ROOT, timeout=TIMEOUT,
                          check=False)


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_every_entry_point_stops_on_an_invalid_setting(tmp_path: Path, entry: str):
    data_dir = tmp_path / "data"
    done = start(ENTRY_POINTS[entry], data_dir, STENO_TURN_LIMIT="abc")
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "STENO_TURN_LIMIT='abc' is not a whole number (2..1000)" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert not data_dir.exists()  # refused before the store was created


@pytest.mark.parametrize(("name", "value", "message"), BAD, ids=[b[0] for b in BAD])
def test_the_mcp_server_names_the_setting_and_what_is_valid(
        tmp_path: Path, name: str, value: str, message: str):
    done = start(ENTRY_POINTS["console-script"], tmp_path / "data", **{name: value})
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"stenographer: {message}\n"


@pytest.mark.parametrize("entry", STDIO)
def test_valid_settings_start_the_stdio_server(tmp_path: Path, entry: str):
    done = start(ENTRY_POINTS[entry], tmp_path / "data", STENO_TURN_LIMIT="12")
    assert done.returncode == 0, done.stderr


@pytest.mark.anyio
async def test_the_console_script_serves_with_valid_settings(tmp_path: Path):
    if not MCP_SCRIPT.exists():
        pytest.skip(f"the console script is not installed next to {sys.executable}")
    params = StdioServerParameters(command=str(MCP_SCRIPT), cwd=str(REPO_ROOT),
                                   env=cli_env(tmp_path / "data", STENO_TURN_LIMIT="12"))
    with anyio.fail_after(TIMEOUT):
        async with Client(params) as client:
            result = await client.call_tool(STATUS, {})
    assert not result.is_error, result.content
