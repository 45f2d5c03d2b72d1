"""The stdio wire, byte by byte: every line gets its answer and the server outlives any
line.

A raw server process is spoken to without an SDK in between. Covered: lines nested
deeper than the parser allows, requests whose id is not a string or an integer, lone
surrogates in a tool's arguments, a tool call before the handshake, end of input with
requests still running (every reply written, then exit 0) on every kind of stdin, and a
property test of random lines against one server process.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.client.stdio import get_default_environment
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from stenographer.stdio import MAX_DEPTH
from tests.e2e.support import (
    INGEST,
    INGEST_LINE,
    REPO_ROOT,
    STATUS,
    RawServer,
    db_counts,
    server_env,
)

EXIT_TIMEOUT = 60.0  # seconds from end of input to exit; generous for a loaded machine


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawServer]:
    """One initialized raw server shared by the tests that only need answers."""
    server = RawServer(tmp_path_factory.mktemp("framing"))
    try:
        assert "result" in server.initialize()
        yield server
    finally:
        server.close()


_ids = iter(range(10_000, 10**9))


def answers_before_probe(raw: RawServer, line: bytes) -> list[dict[str, Any]]:
    """Send ``line`` and then a ping; every message that came back up to the ping's
    answer (which must come: the server is still serving)."""
    raw.send_bytes(line)
    probe = next(_ids)
    reply = raw.request(probe, "ping")
    assert reply.get("result") == {}, reply
    assert raw.proc.poll() is None
    others, raw.pending = raw.pending, []
    return others


def ping_line(params: str) -> bytes:
    return f'{{"jsonrpc":"2.0","id":{next(_ids)},"method":"ping","params":{params}}}\n'.encode()


# --- depth -------------------------------------------------------------------------------------

@pytest.mark.parametrize("depth", [250, 1_000, 100_000])
def test_deeply_nested_line_is_answered_and_the_server_keeps_serving(raw: RawServer,
                                                                      depth: int):
    line = ping_line('{"a":' + "[" * depth + "]" * depth + "}")
    [answer] = answers_before_probe(raw, line)
    assert answer["error"]["code"] == -32600, answer
    assert "nested" in answer["error"]["message"], answer


def test_depth_limit_is_the_same_whichever_parser_reads_the_line(raw: RawServer):
    # The SDK's parser reads plain lines; the standard one reads lines with lone
    # surrogates. Envelope and params are two of the levels.
    for value in ('"plain"', '"half \\ud800"'):
        for depth, served in ((MAX_DEPTH, True), (MAX_DEPTH + 1, False)):
            inner = "[" * (depth - 2) + value + "]" * (depth - 2)
            request = next(_ids)
            raw.send_bytes(f'{{"jsonrpc":"2.0","id":{request},"method":"ping",'
                           f'"params":{{"a":{inner}}}}}\n'.encode())
            reply = raw.wait_for(request)
            if served:
                assert reply.get("result") == {}, (value, depth, reply)
            else:
                assert reply["error"]["code"] == -32600, (value, depth, reply)
                assert f"nested more than {MAX_DEPTH} levels" in reply["error"]["message"]


# --- ids ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("bad_id", ["null", "1.5", "true", "{}", "[]", "1e2"])
def test_request_with_an_invalid_id_gets_invalid_request_for_id_null(raw: RawServer,
                                                                     bad_id: str):
    line = f'{{"jsonrpc":"2.0","id":{bad_id},"method":"ping"}}\n'.encode()
    [answer] = answers_before_probe(raw, line)
    assert answer["id"] is None and answer["error"]["code"] == -32600, answer
    message = answer["error"]["message"]
    assert "id" in message and "string or an integer" in message, message
    # A notification (no id member) is still not answered.
    assert answers_before_probe(
        raw, b'{"jsonrpc":"2.0","method":"notifications/progress","params":{}}\n') == []


# --- surrogates --------------------------------------------------------------------------------

def test_lone_surrogate_in_arguments_gets_the_tools_own_message(raw: RawServer):
    assert raw.call_tool(next(_ids), STATUS, {})["result"]["isError"] is False  # store open
    before = db_counts(raw.data_dir / "steno.db")
    request = next(_ids)
    raw.send_bytes(b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":'
                   b'"stenographer_ingest_exchange","arguments":{"role":"user",'
                   b'"content":"half \\ud800 pair","session_id":"raw"}}}\n' % request)
    reply = raw.wait_for(request)
    assert reply["result"]["isError"] is True, reply
    message = reply["result"]["content"][0]["text"]
    assert "content: contains a lone surrogate (U+D800) at position 5" in message, message
    assert db_counts(raw.data_dir / "steno.db") == before


def test_reply_that_echoes_a_lone_surrogate_is_still_written(raw: RawServer):
    # The unknown method's name comes back in the error; it cannot be UTF-8 encoded.
    request = next(_ids)
    raw.send_bytes(b'{"jsonrpc":"2.0","id":%d,"method":"no/such\\udc00"}\n' % request)
    reply = raw.wait_for(request)
    assert reply["error"]["code"] == -32601, reply
    assert raw.proc.poll() is None


# --- before the handshake ----------------------------------------------------------------------

def test_tool_call_before_initialize_says_what_to_send(tmp_path: Path):
    server = RawServer(tmp_path)
    try:
        reply = server.call_tool(1, INGEST, {"role": "user", "content": "x",
                                             "session_id": "early"})
        error = reply["error"]
        message = f"{error['message']} {error.get('data') or ''}"
        assert "not initialized" in message and "initialize" in message, error
        assert "notifications/initialized" in message, error
        assert "result" in server.initialize()  # the handshake still works afterwards
        reply = server.call_tool(2, INGEST, {"role": "user", "content": "x",
                                             "session_id": "early"})
        assert reply["result"]["isError"] is False, reply
    finally:
        server.close()


# --- end of input ------------------------------------------------------------------------------

def handshake_lines() -> list[dict[str, Any]]:
    return [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": HANDSHAKE_PROTOCOL_VERSIONS[-1], "capabilities": {},
                "clientInfo": {"name": "eof-test", "version": "0"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"}]


def ingest_line(request_id: int, content: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {
        "name": INGEST, "arguments": {"role": "user", "content": content,
                                      "session_id": "eof"}}}


def encode(messages: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(m).encode() + b"\n" for m in messages)


def run_to_exit(data_dir: Path, stdin: Any, *, feed: bytes | None = None,
                stdout: Any = subprocess.PIPE) -> tuple[int, list[dict[str, Any]], str]:
    """Run the stdio server to its exit: the exit code, what it wrote, its stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "stenographer"], stdin=stdin, stdout=stdout,
        stderr=subprocess.PIPE, env=get_default_environment() | server_env(data_dir),
        cwd=str(REPO_ROOT))
    try:
        out, err = proc.communicate(feed, timeout=EXIT_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate(timeout=10)
        raise AssertionError(f"still running {EXIT_TIMEOUT} s after end of input:\n"
                             f"{err.decode(errors='replace')}") from None
    replies = [json.loads(line) for line in (out or b"").splitlines()]
    return proc.returncode, replies, err.decode(errors="replace")


@pytest.mark.parametrize("turns", [1, 20])
def test_end_of_input_finishes_every_request_read_and_writes_every_reply(
        tmp_path: Path, turns: int):
    requests = [ingest_line(i, f"turn {i} before end of input") for i in range(1, turns + 1)]
    code, replies, err = run_to_exit(tmp_path, subprocess.PIPE,
                                     feed=encode([*handshake_lines(), *requests]))
    assert code == 0, err
    by_id = {r["id"]: r for r in replies}
    assert sorted(by_id) == list(range(turns + 1)), replies
    for i in range(1, turns + 1):
        assert by_id[i]["result"]["isError"] is False, by_id[i]
        assert INGEST_LINE.fullmatch(by_id[i]["result"]["content"][0]["text"])
    assert db_counts(tmp_path / "steno.db")["exchanges"] == turns
    assert "Traceback" not in err, err


def _socket_stdin(ours: socket.socket, data: bytes) -> threading.Thread:
    """A thread that writes ``data`` to our end of a socket pair, then shuts it down."""

    def write() -> None:
        ours.sendall(data)
        ours.shutdown(socket.SHUT_WR)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    return writer


@pytest.mark.parametrize("stdin_kind", ["devnull", "file", "file-to-file", "socket"])
def test_every_kind_of_stdin_is_served_to_its_end_and_exits_0(tmp_path: Path,
                                                              stdin_kind: str):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    requests = [*handshake_lines(), ingest_line(1, "read from a non-pipe stdin"),
                {"jsonrpc": "2.0", "id": 2, "method": "ping"}]
    expected_ids = [0, 1, 2]
    source = tmp_path / "input.jsonl"
    source.write_bytes(encode(requests))
    sink = tmp_path / "output.jsonl"
    if stdin_kind == "devnull":
        with open(os.devnull, "rb") as stdin:
            code, replies, err = run_to_exit(data_dir, stdin)
        expected_ids = []
    elif stdin_kind == "file":
        with source.open("rb") as stdin:
            code, replies, err = run_to_exit(data_dir, stdin)
    elif stdin_kind == "file-to-file":
        with source.open("rb") as stdin, sink.open("wb") as stdout:
            code, _, err = run_to_exit(data_dir, stdin, stdout=stdout)
        replies = [json.loads(line) for line in sink.read_bytes().splitlines()]
    else:
        ours, theirs = socket.socketpair()
        with ours, theirs:
            writer = _socket_stdin(ours, source.read_bytes())
            code, replies, err = run_to_exit(data_dir, theirs)
            writer.join(timeout=10)
    assert code == 0, err
    assert "Traceback" not in err, err
    by_id = {r["id"]: r for r in replies}
    assert len(replies) == len(by_id) and sorted(by_id) == expected_ids, replies
    assert all("result" in r for r in replies), replies
    if expected_ids:
        assert by_id[1]["result"]["isError"] is False, by_id[1]


# --- any line ----------------------------------------------------------------------------------

JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                         st.text(max_size=20))
JSON_VALUES = st.recursive(JSON_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12)
MESSAGE_LIKE = st.fixed_dictionaries({}, optional={
    "jsonrpc": st.sampled_from(["2.0", "1.0", 2.0]),
    "id": JSON_VALUES,
    "method": st.one_of(st.sampled_from(["ping", "tools/list", "tools/call", "resources/read",
                                         "notifications/cancelled", "initialize"]),
                        JSON_SCALARS),
    "params": JSON_VALUES,
    "result": JSON_VALUES,
    "error": JSON_VALUES,
}).map(lambda m: json.dumps(m).encode())
NESTED = st.tuples(st.integers(min_value=1, max_value=3_000), st.sampled_from(
    [b"%s", b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":%s}}'])).map(
    lambda spec: spec[1] % (b"[" * spec[0] + b"]" * spec[0]))
LINES = st.lists(st.one_of(st.binary(max_size=300), MESSAGE_LIKE, NESTED,
                           st.text(max_size=100).map(lambda t: t.encode("utf-8", "surrogatepass"))),
                 min_size=1, max_size=6)


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(lines=LINES)
def test_random_lines_never_stop_the_server(raw: RawServer, lines: list[bytes]):
    raw.send_bytes(b"".join(line + b"\n" for line in lines))
    probe = f"probe-{next(_ids)}"  # a string id no random line can cancel by number
    reply = raw.request(probe, "ping")  # type: ignore[arg-type]
    assert reply == {"jsonrpc": "2.0", "id": probe, "result": {}}, reply
    assert raw.proc.poll() is None
    raw.pending = []
