"""The server's command lines as real processes: `omega-stenographer-mcp` (the console
script) and `python -m stenographer` take the original server's `--help`, `--sse` and
`--port`; an unknown argument fails at once with a usage line, never a silent stdio
server. Stdin stays open in every case, so a stdio server could not pass by exiting at
end of input."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx
import pytest
from mcp.client import Client
from mcp.client.sse import sse_client

from tests.cli.conftest import REPO_ROOT, cli_env

pytestmark = pytest.mark.anyio

SCRIPT = str(Path(sys.executable).with_name("omega-stenographer-mcp"))
MODULE = [sys.executable, "-m", "stenographer"]
ENTRY_POINTS = [pytest.param([SCRIPT], id="console-script"), pytest.param(MODULE, id="module")]
TIMEOUT = 60.0  # seconds; generous for a loaded machine, never infinite
TOKEN = "entry-point-token-0123456789abcdef"


def start(command: list[str], data_dir: Path, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(command, cwd=REPO_ROOT, env=cli_env(data_dir, **env),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of a process that must exit by itself, stdin open."""
    try:
        code = proc.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
        raise AssertionError(f"still running after {TIMEOUT} s with stdin open") from None
    assert proc.stdout is not None and proc.stderr is not None and proc.stdin is not None
    out, err = proc.stdout.read(), proc.stderr.read()
    proc.stdin.close()
    proc.stdout.close()
    proc.stderr.close()
    return code, out, err


# `python -m stenographer --help` alone lists the commands for people (tested with them).
@pytest.mark.parametrize("command", [[SCRIPT, "--help"], [*MODULE, "--sse", "--help"]],
                         ids=["console-script", "module"])
def test_help_prints_the_servers_options_and_exits_0(tmp_path: Path, command: list[str]):
    code, out, err = finish(start(command, tmp_path / "data"))
    assert code == 0, err
    assert out.startswith("usage: omega-stenographer-mcp"), out
    for option in ("--sse", "--http", "--port", "--host"):
        assert option in out, out
    assert not (tmp_path / "data").exists()  # --help touches nothing


@pytest.mark.parametrize(("command", "args", "expect"), [
    pytest.param([SCRIPT], ["--bogus"], "unrecognized arguments: --bogus", id="script-bogus"),
    pytest.param(MODULE, ["--bogus"], "unrecognized arguments: --bogus", id="module-bogus"),
    pytest.param([SCRIPT], ["stdio"], "unrecognized arguments: stdio", id="script-word"),
    pytest.param([SCRIPT], ["--sse", "--port", "80x"], "'80x' is not a whole number",
                 id="script-bad-port"),
    pytest.param(MODULE, ["--sse", "--port", "80x"], "'80x' is not a whole number",
                 id="module-bad-port"),
])
def test_unknown_or_malformed_arguments_fail_at_once_with_usage(
        tmp_path: Path, command: list[str], args: list[str], expect: str):
    code, out, err = finish(start([*command, *args], tmp_path / "data"))
    assert code == 2, (out, err)
    assert out == "" and err.startswith("usage: omega-stenographer-mcp"), (out, err)
    assert expect in err, err


@pytest.mark.parametrize("command", ENTRY_POINTS)
def test_port_without_http_fails_at_once_and_names_the_option(tmp_path: Path,
                                                             command: list[str]):
    code, out, err = finish(start([*command, "--port", "8056"], tmp_path / "data"))
    assert code == 2, (out, err)
    assert "--host and --port need --http or --sse" in err, err
    assert not (tmp_path / "data").exists()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(proc: subprocess.Popen[str], port: int) -> None:
    deadline = time.monotonic() + TIMEOUT
    while True:
        assert proc.poll() is None, f"exited {proc.returncode}"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                return
        except OSError:
            assert time.monotonic() < deadline, f"not listening after {TIMEOUT} s"
            time.sleep(0.05)


@pytest.mark.parametrize("command", ENTRY_POINTS)
async def test_sse_and_port_serve_http_with_the_same_token_check(tmp_path: Path,
                                                                 command: list[str]):
    port = free_port()
    proc = start([*command, "--sse", "--port", str(port)], tmp_path / "data",
                 STENO_HTTP_TOKEN=TOKEN)
    try:
        wait_listening(proc, port)
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            for path in ("/sse", "/mcp"):
                refused = await http.get(base + path)
                assert refused.status_code == 401, (path, refused.status_code)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        with anyio.fail_after(TIMEOUT):
            async with Client(sse_client(base + "/sse", headers=headers, timeout=TIMEOUT,
                                         sse_read_timeout=TIMEOUT),
                              read_timeout_seconds=TIMEOUT) as client:
                status = await client.call_tool("stenographer_capture_status", {})
        assert not status.is_error, status.content
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        code, _, err = finish(proc)
    assert code == 0, err
    assert "serving MCP at" in err and f":{port}/sse" in err, err
