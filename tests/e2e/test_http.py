"""The HTTP server end to end: a real server process (``python -m stenographer serve
--http``) on 127.0.0.1 driven by the SDK client over Streamable HTTP (``/mcp``) and
legacy SSE (``/sse`` + ``/messages/``), with the current protocol and with the 2025
initialize handshake.

Covered: the six tools (and a resource) on both transports against one store opened
once; Host and Origin checks (421 / 403) on every path; the bearer token (401 without it
or with a wrong one, on every path, loopback included); a token generated into an
owner-only file of the data directory when none is configured, and `--no-token` (loopback
only) to serve without one; the refusal to bind a
non-loopback address without a token and both allowlists (exit 2); the checks kept on
when bound to 0.0.0.0; and SIGTERM with a tool call in flight on each transport: both
replies arrive, the process exits 0 and the reopened store holds every acknowledged
turn and its trace.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import apsw
import h11
import httpx
import httpx2
import pytest
from anyio.abc import SocketStream
from mcp.client import Client
from mcp.client.sse import sse_client
from mcp.client.stdio import get_default_environment
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import SecretStr

from stenographer.http_auth import TOKEN_FILE, HttpConfigError, check_bind, is_loopback
from stenographer.settings import Settings, SettingsError
from tests.e2e.support import (
    GUARD,
    INGEST,
    INGEST_LINE,
    MILESTONE,
    NOTES,
    REPO_ROOT,
    SEARCH,
    STATUS,
    TOOLS,
    assert_trace,
    server_env,
    word,
)

pytestmark = pytest.mark.anyio

TOKEN = "steno-test-token-0123456789abcdef"
CALL_TIMEOUT = 60.0  # seconds per MCP request; generous for a loaded machine, never infinite
START_TIMEOUT = 60.0  # process start to a listening socket
STOP_TIMEOUT = 30.0  # SIGTERM to exit
TURN_LIMIT = 8  # STENO_TURN_LIMIT default: the 8th turn compresses
HANDSHAKE = HANDSHAKE_PROTOCOL_VERSIONS[-1]
TRANSPORTS = [(t, m) for t in ("http", "sse") for m in ("auto", "legacy")]
# One request per route; none of them may reach the app when refused.
PATHS = ("/mcp", "/sse", "/messages/?session_id=" + "0" * 32, "/inspect/", "/inspect/api/sessions")


def serve_command(host: str, port: int, *args: str) -> list[str]:
    return [sys.executable, "-m", "stenographer", "serve", "--http", "--host", host,
            "--port", str(port), *args]


# --- the server process ------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class HttpServer:
    proc: subprocess.Popen[bytes]
    port: int
    data_dir: Path
    stderr_path: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return self.base + path

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def wait_listening(self) -> None:
        """Bounded polling with a TCP connect (not an HTTP request)."""
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited {self.proc.returncode}:\n{self.stderr()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1.0):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError(f"not listening after {START_TIMEOUT} s:\n"
                                         f"{self.stderr()}") from None
                time.sleep(0.05)

    def stop(self, *, signalled: bool = False) -> int:
        """SIGTERM (unless sent already: a second one means "stop now"), then the exit
        code (killed, and an error, after STOP_TIMEOUT)."""
        if not signalled and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise AssertionError(f"still running {STOP_TIMEOUT} s after SIGTERM:\n"
                                 f"{self.stderr()}") from None


def launch(data_dir: Path, *, host: str = "127.0.0.1", args: tuple[str, ...] = (),
           **env: str) -> HttpServer:
    data_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    stderr_path = data_dir.parent / f"{data_dir.name}-stderr.log"
    with stderr_path.open("wb") as stderr:
        proc = subprocess.Popen(
            serve_command(host, port, *args),
            env=get_default_environment() | server_env(data_dir, **env), cwd=str(REPO_ROOT),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
    return HttpServer(proc, port, data_dir, stderr_path)


@contextmanager
def running(data_dir: Path, **kwargs: Any) -> Iterator[HttpServer]:
    server = launch(data_dir, **kwargs)
    try:
        server.wait_listening()
        yield server
    finally:
        code = server.stop()
    assert code == 0, server.stderr()


def token_file(directory: Path, mode: int) -> Path:
    path = directory / "token"
    path.write_text(TOKEN + "\n")
    path.chmod(mode)
    return path


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """127.0.0.1, no token (--no-token)."""
    with running(tmp_path_factory.mktemp("http") / "data", args=("--no-token",)) as server:
        yield server


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """127.0.0.1 with a token read from an owner-only file."""
    directory = tmp_path_factory.mktemp("http-token")
    path = token_file(directory, 0o600)
    with running(directory / "data", STENO_HTTP_TOKEN_FILE=str(path)) as server:
        yield server
    assert "warning" not in server.stderr()


# --- clients -----------------------------------------------------------------------------------

@asynccontextmanager
async def connect(server: HttpServer, transport: str, mode: str = "auto",
                  token: str | None = None) -> AsyncIterator[Client]:
    """The SDK client; ``read_timeout_seconds`` bounds the handshake and every request."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if transport == "http":
        http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(CALL_TIMEOUT))
        async with http, Client(streamable_http_client(server.url("/mcp"), http_client=http),
                                mode=mode, read_timeout_seconds=CALL_TIMEOUT) as client:
            yield client
    else:
        async with Client(sse_client(server.url("/sse"), headers=headers, timeout=CALL_TIMEOUT,
                                     sse_read_timeout=CALL_TIMEOUT),
                          mode=mode, read_timeout_seconds=CALL_TIMEOUT) as client:
            yield client


async def ok(client: Client, name: str, arguments: dict[str, Any] | None = None
             ) -> dict[str, Any]:
    with anyio.fail_after(CALL_TIMEOUT):
        result = await client.call_tool(name, arguments or {})
    assert not result.is_error, result.content
    content: dict[str, Any] | None = result.structured_content
    assert content is not None
    return content


async def six_tools(client: Client) -> list[int]:
    """Every tool once (ingest until compression), checked; the ingested ids."""
    assert {t.name for t in (await client.list_tools()).tools} == set(TOOLS)
    session = word()
    contents = [f"{session} step {i}: wired the transport" for i in range(TURN_LIMIT)]
    contents[1] = "We decided to serve SSE and Streamable HTTP from one process."
    replies = [await ok(client, INGEST, {"role": "user", "content": c, "session_id": session,
                                         "trace": True}) for c in contents]
    ids = [r["exchange_id"] for r in replies]
    for r in replies:
        assert INGEST_LINE.fullmatch(r["text"].splitlines()[0]), r["text"]
        assert_trace(r["trace"], "ingest")
    [brief] = replies[-1]["compressed"]
    assert brief["tier"] == "A" and brief["turns"] == TURN_LIMIT

    marked = await ok(client, MILESTONE, {"session_id": session, "exchange_id": ids[1],
                                          "label": "one process"})
    assert marked["exchange_id"] == ids[1]
    assert_trace(marked["trace"], "milestone")
    page = await ok(client, SEARCH, {"query": "decided", "session_id": session,
                                     "mode": "keyword"})
    hits = [h["exchange_id"] for h in page["hits"]]
    assert hits[0] == ids[1] and set(hits) <= set(ids), hits  # the decision first
    assert_trace(page["trace"], "search")
    notes = await ok(client, NOTES, {"session_id": session})
    assert "**one process**" in notes["markdown"] and f"#{ids[1]}" in notes["markdown"]
    assert_trace(notes["trace"], "notes")
    guard = await ok(client, GUARD, {"session_id": session, "query": "transport"})
    assert guard["brief_ids"] == [brief["id"]]
    assert_trace(guard["trace"], "guard")
    status = await ok(client, STATUS)
    assert status["status"]["store"]["exchanges"] >= TURN_LIMIT
    assert_trace(status["trace"], "status")

    with anyio.fail_after(CALL_TIMEOUT):
        res = await client.read_resource(f"omega-stenographer://sessions/{session}/notes",
                                         cache_mode="bypass")
    assert res.contents[0].text == notes["markdown"]  # type: ignore[union-attr]
    return ids


def stored(data_dir: Path, sql: str) -> set[Any]:
    """One column of a query on the store file, read-only (the server may be stopped)."""
    conn = apsw.Connection(str(data_dir / "steno.db"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return {row[0] for row in conn.execute(sql)}
    finally:
        conn.close()


# --- tools over both transports ------------------------------------------------------------------

@pytest.mark.parametrize(("transport", "mode"), TRANSPORTS,
                         ids=[f"{t}-{m}" for t, m in TRANSPORTS])
async def test_six_tools_over_each_transport(plain: HttpServer, transport: str, mode: str):
    async with connect(plain, transport, mode) as client:
        ids = await six_tools(client)
    assert set(ids) <= stored(plain.data_dir, "SELECT id FROM exchanges")


def store_handles(pid: int, db: Path) -> int:
    """Open file descriptors of ``pid`` on the store file (Linux /proc)."""
    fd_dir = Path(f"/proc/{pid}/fd")
    count = 0
    for fd in fd_dir.iterdir():
        try:
            count += os.readlink(fd) == str(db)
        except OSError:  # closed meanwhile
            pass
    return count


async def test_transports_share_one_store_opened_once(plain: HttpServer):
    if not Path(f"/proc/{plain.proc.pid}/fd").is_dir():
        pytest.skip("needs /proc")
    session = word()
    db = (plain.data_dir / "steno.db").resolve()
    async with connect(plain, "sse") as sse, connect(plain, "http") as http:
        written = await ok(sse, INGEST, {"role": "user", "content": f"{session} via SSE",
                                         "session_id": session})
        found = await ok(http, SEARCH, {"query": session, "session_id": session,
                                        "mode": "keyword"})
        assert [h["exchange_id"] for h in found["hits"]] == [written["exchange_id"]]
        # The trace writer's thread opens its connection at its first flush, up to
        # 0.25 s after a run (store.runs.TraceBuffer): count once it has.
        await anyio.sleep(1.0)
        before = store_handles(plain.proc.pid, db)
        assert before >= 1
        async with AsyncExitStack() as stack:  # more clients: no more store connections
            for transport in ("sse", "sse", "http", "sse"):
                client = await stack.enter_async_context(connect(plain, transport))
                await ok(client, SEARCH, {"query": session, "session_id": session})
            assert store_handles(plain.proc.pid, db) == before


async def test_keep_alive_replies_are_not_held_back_by_delayed_acks(plain: HttpServer):
    """A listening socket created without IPPROTO_TCP leaves TCP_NODELAY off on accepted
    connections: every reply on a kept-alive connection then waits ~40 ms for the
    client's delayed ACK. A 404 takes about a millisecond."""
    async with httpx.AsyncClient(timeout=CALL_TIMEOUT) as http:
        times = []
        for _ in range(15):
            started = time.perf_counter()
            assert (await http.get(plain.url("/nothing-here"))).status_code == 404
            times.append(time.perf_counter() - started)
    assert sorted(times)[len(times) // 2] < 0.030, times


# --- Host and Origin --------------------------------------------------------------------------

async def test_foreign_host_or_origin_is_refused_on_every_path(plain: HttpServer):
    port = plain.port
    async with httpx.AsyncClient(timeout=CALL_TIMEOUT) as http:
        for path in PATHS:
            url = plain.url(path)
            for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1:{port + 1}",
                         f"localhost.evil.example:{port}"):
                r = await http.get(url, headers={"Host": host})
                assert r.status_code == 421, (path, host, r.text)
            r = await http.post(url, headers={"Host": f"evil.example:{port}"}, json={})
            assert r.status_code == 421, path
            for origin in ("http://evil.example", f"http://evil.example:{port}",
                           f"http://localhost:{port + 1}", f"https://127.0.0.1:{port}", "null"):
                r = await http.get(url, headers={"Origin": origin})
                assert r.status_code == 403, (path, origin, r.text)
        # Loopback names on the bound port pass, with or without a browser Origin.
        for host in (f"127.0.0.1:{port}", f"localhost:{port}"):
            r = await http.get(plain.url("/inspect/api/sessions"),
                               headers={"Host": host, "Origin": f"http://{host}"})
            assert r.status_code == 200, (host, r.text)


# --- the token --------------------------------------------------------------------------------

async def test_missing_or_wrong_token_gets_401_on_every_path(guarded: HttpServer):
    wrong = [{}, {"Authorization": f"Bearer {TOKEN}x"}, {"Authorization": f"Bearer {TOKEN[:-1]}"},
             {"Authorization": "Bearer"}, {"Authorization": f"Basic {TOKEN}"},
             {"Authorization": TOKEN}]
    async with httpx.AsyncClient(timeout=CALL_TIMEOUT) as http:
        for path in PATHS:
            for headers in wrong:
                for method in ("GET", "POST"):
                    r = await http.request(method, guarded.url(path), headers=headers)
                    assert r.status_code == 401, (method, path, headers, r.text)
                    assert r.headers["www-authenticate"].startswith("Bearer ")
        right = {"Authorization": f"Bearer {TOKEN}"}
        r = await http.get(guarded.url("/inspect/api/sessions"), headers=right)
        assert r.status_code == 200, r.text
        r = await http.get(guarded.url("/inspect/api/sessions"),
                           headers=right | {"Host": f"evil.example:{guarded.port}"})
        assert r.status_code == 421  # a token does not lift the Host check
        r = await http.get(guarded.url("/inspect/api/sessions"),
                           headers={"Authorization": f"bearer {TOKEN}"})
        assert r.status_code == 200  # the scheme is case-insensitive (RFC 9110)


async def test_without_a_configured_token_one_is_generated_into_an_owner_only_file(
        tmp_path: Path):
    data = tmp_path / "data"
    path = data / TOKEN_FILE
    with running(data) as server:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        token = path.read_text().strip()
        assert re.fullmatch(r"[0-9a-f]{64}", token), token
        async with httpx.AsyncClient(timeout=CALL_TIMEOUT) as http:
            for url in (server.url("/inspect/api/sessions"), server.url("/sync/pull")):
                r = await http.get(url)
                assert r.status_code == 401, (url, r.text)
                assert TOKEN_FILE in r.json()["error_description"]
                r = await http.get(url, headers={"Authorization": f"Bearer {token}"})
                assert r.status_code == 200, (url, r.text)
        async with connect(server, "http", token=token) as client:
            await ok(client, STATUS)
        with anyio.fail_after(CALL_TIMEOUT), pytest.raises((BaseExceptionGroup, MCPError)):
            async with connect(server, "http"):
                pass
    stderr = server.stderr()
    assert f"bearer token required: generated into {path} (owner-only)" in stderr
    assert f'curl -H "Authorization: Bearer $(cat {path})"' in stderr
    assert token not in stderr

    with running(data) as again:  # kept: clients configured once keep working
        async with connect(again, "http", token=token) as client:
            await ok(client, STATUS)
    assert f"bearer token required: read from {path}" in again.stderr()
    assert path.read_text().strip() == token


async def test_no_token_serves_loopback_without_one_and_makes_no_token_file(
        plain: HttpServer):
    async with httpx.AsyncClient(timeout=CALL_TIMEOUT) as http:
        assert (await http.get(plain.url("/inspect/api/sessions"))).status_code == 200
    assert not (plain.data_dir / TOKEN_FILE).exists()
    assert "no token (--no-token): every user of this machine can call" in plain.stderr()


NO_TOKEN_REFUSALS = [
    ("0.0.0.0", {"STENO_ALLOWED_HOSTS": "steno.test:1",
                 "STENO_ALLOWED_ORIGINS": "http://steno.test:1"},
     "--no-token is refused on 0.0.0.0, which is reachable from other machines"),
    ("::", {}, "--no-token is refused on ::, which is reachable from other machines"),
    ("127.0.0.1", {"STENO_HTTP_TOKEN": TOKEN},
     "--no-token conflicts with the configured bearer token"),
]


@pytest.mark.parametrize(("host", "env", "message"), NO_TOKEN_REFUSALS)
async def test_no_token_is_refused_off_loopback_and_with_a_configured_token(
        tmp_path: Path, host: str, env: dict[str, str], message: str):
    done = await anyio.to_thread.run_sync(
        lambda: run_to_exit(tmp_path / "data", host, "--no-token", **env))
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"stenographer: {message}"), done.stderr
    assert not (tmp_path / "data" / "steno.db").exists()


def leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_sdk_client_needs_the_token(guarded: HttpServer, transport: str):
    async with connect(guarded, transport, token=TOKEN) as client:
        await six_tools(client)
    with anyio.fail_after(CALL_TIMEOUT), \
            pytest.raises((BaseExceptionGroup, httpx2.HTTPStatusError)) as caught:
        async with connect(guarded, transport, token="not-the-token-0123456789"):
            pass
    [error] = leaves(caught.value)
    if transport == "sse":
        assert isinstance(error, httpx2.HTTPStatusError), error
        assert error.response.status_code == 401
    else:  # the SDK reports a failed POST without its status (401 is pinned above)
        assert isinstance(error, MCPError) and "error response" in str(error), error


# --- bind addresses ---------------------------------------------------------------------------

def run_to_exit(data_dir: Path, host: str, *args: str, **env: str
                ) -> subprocess.CompletedProcess[str]:
    data_dir.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        serve_command(host, free_port(), *args),
        env=get_default_environment() | server_env(data_dir, **env), cwd=str(REPO_ROOT),
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=START_TIMEOUT)


REFUSALS = [
    ("0.0.0.0", {}, ["STENO_HTTP_TOKEN", "STENO_ALLOWED_HOSTS", "STENO_ALLOWED_ORIGINS"]),
    ("::", {"STENO_HTTP_TOKEN": TOKEN}, ["STENO_ALLOWED_HOSTS", "STENO_ALLOWED_ORIGINS"]),
    ("0.0.0.0", {"STENO_ALLOWED_HOSTS": "steno.test:1", "STENO_ALLOWED_ORIGINS": "http://steno.test:1"},
     ["STENO_HTTP_TOKEN"]),
    ("0.0.0.0", {"STENO_HTTP_TOKEN": TOKEN, "STENO_ALLOWED_HOSTS": "steno.test:1"},
     ["STENO_ALLOWED_ORIGINS"]),
]


@pytest.mark.parametrize(("host", "env", "named"), REFUSALS)
async def test_non_loopback_bind_without_token_and_allowlists_exits_2(
        tmp_path: Path, host: str, env: dict[str, str], named: list[str]):
    done = await anyio.to_thread.run_sync(lambda: run_to_exit(tmp_path / "data", host, **env))
    assert done.returncode == 2, done.stderr
    message = done.stderr.strip()
    assert message.startswith(f"stenographer: refusing to serve HTTP on {host}"), message
    assert "Traceback" not in message
    for name in ("STENO_HTTP_TOKEN", "STENO_ALLOWED_HOSTS", "STENO_ALLOWED_ORIGINS"):
        assert (name in message) == (name in named), (name, message)
    assert TOKEN not in message
    assert not (tmp_path / "data" / "steno.db").exists()  # refused before opening anything


async def test_bad_http_settings_exit_2_with_what_is_valid(tmp_path: Path):
    done = await anyio.to_thread.run_sync(lambda: run_to_exit(
        tmp_path / "data", "127.0.0.1", STENO_ALLOWED_HOSTS="steno.test:8765/mcp"))
    assert done.returncode == 2
    assert "STENO_ALLOWED_HOSTS entry 'steno.test:8765/mcp' is not valid (expected" in done.stderr


async def test_all_interfaces_with_token_and_allowlists_keeps_every_check(tmp_path: Path):
    """0.0.0.0 is where the SDK would drop its Host/Origin checks: they must hold."""
    path = token_file(tmp_path, 0o644)  # readable by others: served, with a warning
    data = tmp_path / "data"
    with running(data, host="0.0.0.0", STENO_HTTP_TOKEN_FILE=str(path),
                 STENO_ALLOWED_HOSTS="steno.test:*",
                 STENO_ALLOWED_ORIGINS="http://steno.test:*") as server:
        right = {"Authorization": f"Bearer {TOKEN}"}
        api = server.url("/inspect/api/sessions")
        async with httpx.AsyncClient(timeout=CALL_TIMEOUT) as http:
            for host in (f"steno.test:{server.port}", f"127.0.0.1:{server.port}"):
                r = await http.get(api, headers=right | {"Host": host})
                assert r.status_code == 200, (host, r.text)
            r = await http.get(api, headers=right | {"Host": f"evil.example:{server.port}"})
            assert r.status_code == 421
            r = await http.get(api, headers=right | {"Origin": "http://evil.example"})
            assert r.status_code == 403
            r = await http.get(api, headers=right | {"Origin": f"http://steno.test:{server.port}"})
            assert r.status_code == 200
            r = await http.get(api, headers={"Host": f"steno.test:{server.port}"})
            assert r.status_code == 401
        async with connect(server, "http", token=TOKEN) as client:
            await ok(client, STATUS)
    stderr = server.stderr()
    assert f"the token file {path.resolve()} can be read by other users (mode 0644)" in stderr
    assert TOKEN not in stderr


def test_loopback_and_bind_checks_in_process():
    for host in ("127.0.0.1", "127.8.9.10", "localhost", "LOCALHOST", "::1", "[::1]"):
        assert is_loopback(host), host
        check_bind(Settings(), host)  # loopback: nothing required
    for host in ("0.0.0.0", "::", "192.168.1.5", "steno.lan", "localhost.example"):
        assert not is_loopback(host), host
        with pytest.raises(HttpConfigError, match=f"refusing to serve HTTP on {host}"):
            check_bind(Settings(), host)
    ready = Settings(http_token=TOKEN, allowed_hosts=("steno.lan:8765",),
                     allowed_origins=("http://steno.lan:8765",))
    check_bind(ready, "0.0.0.0")
    assert TOKEN not in repr(ready)


def test_http_settings_from_the_environment(tmp_path: Path):
    path = token_file(tmp_path, 0o600)
    s = Settings.from_env({"STENO_HTTP_TOKEN_FILE": str(path),
                           "STENO_ALLOWED_HOSTS": " Steno.LAN:8765, [::1]:*,steno.lan:8765 ",
                           "STENO_ALLOWED_ORIGINS": "https://steno.lan"})
    assert s.http_token is not None and s.http_token.get_secret_value() == TOKEN
    assert s.http_token_file == path.resolve()
    assert s.allowed_hosts == ("steno.lan:8765", "[::1]:*")
    assert s.allowed_origins == ("https://steno.lan",)
    assert Settings.from_env({}).http_token is None
    assert Settings.from_env({"STENO_HTTP_TOKEN": TOKEN}).http_token == SecretStr(TOKEN)
    bad = [
        ({"STENO_HTTP_TOKEN": TOKEN, "STENO_HTTP_TOKEN_FILE": str(path)}, "not both"),
        ({"STENO_HTTP_TOKEN": "short"}, "at least 16 visible ASCII"),
        ({"STENO_HTTP_TOKEN": "with space in the middle of it"}, "without spaces"),
        ({"STENO_HTTP_TOKEN_FILE": str(tmp_path / "absent")}, "cannot be read"),
        ({"STENO_ALLOWED_ORIGINS": "steno.lan:8765"}, "expected http(s)://host"),
        ({"STENO_ALLOWED_HOSTS": "http://steno.lan"}, "expected host[:port]"),
    ]
    (tmp_path / "empty").write_text("\n")
    bad.append(({"STENO_HTTP_TOKEN_FILE": str(tmp_path / "empty")}, "is empty"))
    for env, message in bad:
        with pytest.raises(SettingsError, match=re.escape(message)) as caught:
            Settings.from_env(env)
        token = env.get("STENO_HTTP_TOKEN")
        assert token is None or token not in str(caught.value)  # never echoed


# --- graceful shutdown ------------------------------------------------------------------------

@dataclass
class RawSse:
    """A legacy SSE session spoken by hand: a POST answered 202 means the server has
    taken the call, which the SDK client does not expose."""

    http: httpx.AsyncClient
    base: str
    lines: AsyncIterator[str] | None = None
    post_url: str = ""
    seen: list[dict[str, Any]] = field(default_factory=list)

    async def open(self, stack: AsyncExitStack) -> None:
        response = await stack.enter_async_context(self.http.stream("GET", self.base + "/sse"))
        assert response.status_code == 200
        self.lines = response.aiter_lines()
        event, data = await self.next_event()
        assert event == "endpoint", (event, data)
        self.post_url = self.base + data
        assert await self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": HANDSHAKE, "capabilities": {},
            "clientInfo": {"name": "raw-sse", "version": "0"}}}) == 202
        assert "result" in await self.reply(0)
        assert await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}) == 202

    async def next_event(self) -> tuple[str, str]:
        assert self.lines is not None
        event, data = "message", list[str]()
        async for line in self.lines:
            if not line:
                if data:
                    return event, "\n".join(data)
                continue
            key, _, value = line.partition(":")
            if key == "event":
                event = value.strip()
            elif key == "data":
                data.append(value.removeprefix(" "))
        raise AssertionError("the SSE stream ended")

    async def post(self, message: dict[str, Any]) -> int:
        return (await self.http.post(self.post_url, json=message)).status_code

    async def reply(self, request_id: int) -> dict[str, Any]:
        while True:
            event, data = await self.next_event()
            message: dict[str, Any] = json.loads(data)
            if event == "message" and message.get("id") == request_id:
                return message
            self.seen.append(message)


def tool_call(request_id: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}


class HeldHttpCall:
    """A Streamable HTTP tools/call sent in two parts: the head with ``Expect:
    100-continue`` (the server answers 100 once the request has passed every check and
    the app reads the body), then, later, the body."""

    def __init__(self, stream: SocketStream, conn: h11.Connection, body: bytes) -> None:
        self.stream, self.conn, self.body = stream, conn, body

    @classmethod
    async def start(cls, port: int, session_id: str, message: dict[str, Any]) -> HeldHttpCall:
        body = json.dumps(message).encode()
        conn = h11.Connection(h11.CLIENT)
        stream = await anyio.connect_tcp("127.0.0.1", port)
        await stream.send(conn.send(h11.Request(method="POST", target="/mcp", headers=[
            ("Host", f"127.0.0.1:{port}"), ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"), ("Mcp-Session-Id", session_id),
            ("Mcp-Protocol-Version", HANDSHAKE), ("Content-Length", str(len(body))),
            ("Expect", "100-continue"), ("Connection", "close")])))
        held = cls(stream, conn, body)
        event = await held.next_event()
        assert isinstance(event, h11.InformationalResponse) and event.status_code == 100, event
        return held

    async def next_event(self) -> Any:
        while True:
            event = self.conn.next_event()
            if event is not h11.NEED_DATA:
                return event
            self.conn.receive_data(await self.stream.receive(65536))

    async def finish(self) -> dict[str, Any]:
        """Send the body; the JSON-RPC reply (from a JSON or an SSE response)."""
        await self.stream.send(self.conn.send(h11.Data(data=self.body)))
        await self.stream.send(self.conn.send(h11.EndOfMessage()))
        response = await self.next_event()
        assert isinstance(response, h11.Response) and response.status_code == 200, response
        chunks = []
        while not isinstance(event := await self.next_event(), h11.EndOfMessage):
            chunks.append(bytes(event.data))
        await self.stream.aclose()
        text = b"".join(chunks).decode()
        if text.lstrip().startswith("{"):
            reply: dict[str, Any] = json.loads(text)
            return reply
        data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
        replies: list[dict[str, Any]] = [
            m for m in map(json.loads, filter(None, data)) if "id" in m]
        assert replies, f"no JSON-RPC reply in the response: {text!r}"
        return replies[0]


async def http_session(http: httpx.AsyncClient, base: str) -> str:
    """A legacy Streamable HTTP session (initialize + initialized); its id."""
    headers = {"Accept": "application/json, text/event-stream"}
    r = await http.post(base + "/mcp", headers=headers, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": HANDSHAKE, "capabilities": {},
            "clientInfo": {"name": "raw-http", "version": "0"}}})
    assert r.status_code == 200, r.text
    session_id = r.headers["mcp-session-id"]
    r = await http.post(base + "/mcp",
                        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                        headers=headers | {"Mcp-Session-Id": session_id,
                                           "Mcp-Protocol-Version": HANDSHAKE})
    assert r.status_code == 202, r.text
    return session_id


def acknowledged(reply: dict[str, Any]) -> tuple[int, str]:
    result = reply["result"]
    assert not result.get("isError"), result
    sc = result["structuredContent"]
    return sc["exchange_id"], sc["trace"]["run_id"]


@pytest.mark.parametrize("in_flight", ["sse", "http"])
async def test_sigterm_finishes_calls_in_flight_and_keeps_every_acknowledged_turn(
        tmp_path: Path, in_flight: str):
    """A call in flight when SIGTERM arrives finishes and replies, on either transport.

    sse: a large ingest over SSE (seconds on a worker thread; answered 202 before it
    runs) is the only work left once a read over HTTP, held open across the signal, has
    been answered: nothing but its event stream is open.
    http: a large ingest over Streamable HTTP whose head has passed every check (the
    server answered 100 Continue) and whose body is sent after the signal.
    """
    server = launch(tmp_path / "data", args=("--no-token",), STENO_MAX_CONTENT_CHARS="4000000")
    await anyio.to_thread.run_sync(server.wait_listening)
    acked: dict[int, str] = {}  # exchange id -> run id of its trace
    session = word()
    big = " ".join(f"{session} line {i} of the in-flight turn." for i in range(60_000))
    ingest_big = {"role": "user", "content": big, "session_id": session}
    try:
        for transport in ("http", "sse"):  # acknowledged turns through the SDK client
            async with connect(server, transport) as client:
                for i in range(3):
                    sc = await ok(client, INGEST, {"role": "user", "session_id": session,
                                                   "content": f"{transport} turn {i}"})
                    acked[sc["exchange_id"]] = sc["trace"]["run_id"]

        with anyio.fail_after(STOP_TIMEOUT + CALL_TIMEOUT):
            async with httpx.AsyncClient(timeout=CALL_TIMEOUT) as http, AsyncExitStack() as stack:
                http_id = await http_session(http, server.base)
                if in_flight == "sse":
                    sse = RawSse(http, server.base)
                    await sse.open(stack)
                    held = await HeldHttpCall.start(server.port, http_id, tool_call(5, STATUS, {}))
                    assert await sse.post(tool_call(7, INGEST, ingest_big)) == 202
                else:
                    held = await HeldHttpCall.start(server.port, http_id,
                                                    tool_call(6, INGEST, ingest_big))
                signalled = time.monotonic()
                server.proc.send_signal(signal.SIGTERM)
                try:  # new work is refused (or finds the listener closed) ...
                    async with httpx.AsyncClient(timeout=CALL_TIMEOUT) as fresh:
                        late = await fresh.post(server.url("/mcp"), json={})
                    assert late.status_code == 503, late.text
                except httpx.ConnectError:
                    pass
                # ... while the calls taken before it finish and reply.
                reply = await held.finish()
                if in_flight == "sse":
                    status = reply["result"]
                    assert not status["isError"] and status["structuredContent"]["status"]
                    reply = await sse.reply(7)
                exchange_id, run_id = acknowledged(reply)
                acked[exchange_id] = run_id
        code = await anyio.to_thread.run_sync(lambda: server.stop(signalled=True))
        assert code == 0, server.stderr()
        assert time.monotonic() - signalled < STOP_TIMEOUT
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait(timeout=10)

    assert len(acked) == 7
    assert set(acked) <= stored(server.data_dir, "SELECT id FROM exchanges")
    # Stage traces are buffered; the store's close on shutdown wrote them.
    assert set(acked.values()) <= stored(server.data_dir, "SELECT run_id FROM runs")
    assert "Traceback" not in server.stderr(), server.stderr()
