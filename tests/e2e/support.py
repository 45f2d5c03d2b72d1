"""Helpers shared by the end-to-end tests: server launch parameters, reply checks,
store fingerprints and a raw (hand-written JSON-RPC) stdio connection."""

from __future__ import annotations

import hashlib
import json
import queue
import re
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import apsw
from mcp.client.stdio import StdioServerParameters, get_default_environment
from mcp_types import CallToolResult
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

__all__ = [
    "AUDIT",
    "COMPRESSED",
    "FORGET",
    "GRAPH_QUERY",
    "GUARD",
    "INGEST",
    "INGEST_LINE",
    "MILESTONE",
    "NOTES",
    "REPO_ROOT",
    "SEARCH",
    "SHUTDOWN",
    "STATUS",
    "TOOLS",
    "RawServer",
    "assert_trace",
    "db_counts",
    "db_digest",
    "runs_in_order",
    "server_env",
    "stdio_params",
    "text",
    "word",
]

REPO_ROOT = Path(__file__).resolve().parents[2]

INGEST = "stenographer_ingest_exchange"
NOTES = "stenographer_get_brief"
GUARD = "stenographer_compact_guard"
MILESTONE = "stenographer_mark_milestone"
SEARCH = "stenographer_query_history"
STATUS = "stenographer_capture_status"
AUDIT = "stenographer_audit"
FORGET = "stenographer_forget"
GRAPH_QUERY = "stenographer_graph_query"
TOOLS = (INGEST, NOTES, GUARD, MILESTONE, SEARCH, STATUS, AUDIT, FORGET, GRAPH_QUERY)

# The first line of an ingest reply (kept compatible with the original server).
INGEST_LINE = re.compile(
    r"Ingested \[(?P<role>user|assistant|system|tool)\] #(?P<id>\d+) "
    r"\((?P<chars>\d+) chars; decisions: (?P<d>\d+); blockers: (?P<b>\d+)"
    r"(?:; redacted: (?P<redacted>[1-9]\d*))?"
    r"(?:; ⚠ NAFE:(?P<nafe>[A-Z_]+(?:,[A-Z_]+){0,3}))?"
    r"; trace:(?P<trace>VT-\d{8}-[0-9a-f]{8})\)"
    r"(?P<compressed>(?: \| Compressed \d+ turns → brief \d+ \(tier-[AB]\))*)"
    r"(?P<shutdowns>(?: \| CLAEG terminal shutdown from [^|]+ at "
    r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ → #\d+ \(milestone\))*)$"
)
SHUTDOWN = re.compile(
    r"CLAEG terminal shutdown from (?P<source>[^|]+) at (?P<at>\S+) → #(?P<id>\d+) "
    r"\(milestone\)")
COMPRESSED = re.compile(
    r"Compressed (?P<turns>\d+) turns → brief (?P<id>\d+) \(tier-(?P<tier>[AB])\)")


def store_bytes(data_dir: Path) -> bytes:
    """Every byte a SQLite store keeps: its files (``steno.db``, its WAL and journal) and
    the files of the directories beside it (the derived keyword index)."""
    files: list[Path] = []
    for path in sorted(data_dir.glob("steno.db*")):
        files += sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return b"".join(p.read_bytes() for p in files)


def server_env(data_dir: Path | str, **extra: str) -> dict[str, str]:
    """What an MCP host passes: the data directory and the import path, nothing else;
    the coordination bus is looked for inside the data directory, never in ~."""
    return {"OMEGA_STENOGRAPHER_DIR": str(data_dir), "PYTHONPATH": str(REPO_ROOT),
            "VERITAS_SHARED_DIR": str(Path(data_dir) / "veritas-shared"), **extra}


def stdio_params(data_dir: Path | str, **extra: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "stenographer"],
                                 env=server_env(data_dir, **extra), cwd=str(REPO_ROOT))


def word() -> str:
    """A token no other test writes: letters only, so every tokenizer keeps it whole, and
    ending in "q", so no rule for plurals ("-s") or verb and adverb forms ("-ed", "-ly",
    "-ing") reads it as anything but a noun (a random ending made ~1 in 200 runs fail)."""
    return "zq" + "".join(chr(ord("a") + int(c, 16) % 26) for c in uuid.uuid4().hex[:12]) + "q"


def text(result: CallToolResult) -> str:
    assert result.content, result
    first = result.content[0]
    assert first.type == "text", first
    return str(first.text)


def assert_trace(trace: dict[str, Any], graph: str, status: str = "Completed") -> list[str]:
    """Check the stage-trace shape; return the node names in run order."""
    assert set(trace) >= {"run_id", "graph", "status", "duration_ms", "stages"}, trace
    assert re.fullmatch(r"[0-9a-f]{32}", trace["run_id"]), trace["run_id"]
    assert trace["graph"] == graph
    assert trace["status"] == status
    assert isinstance(trace["duration_ms"], int | float) and trace["duration_ms"] >= 0
    assert trace["stages"], "a run records at least one stage"
    for stage in trace["stages"]:
        assert isinstance(stage["node"], str) and stage["node"], stage
        assert isinstance(stage["step"], int), stage
        assert isinstance(stage["duration_ms"], int | float) and stage["duration_ms"] >= 0
        assert isinstance(stage["writes"], dict), stage
        if status == "Completed":
            assert stage.get("error") is None, stage
    return [s["node"] for s in trace["stages"]]


def runs_in_order(nodes: list[str], expected: list[str], absent: tuple[str, ...] = ()) -> bool:
    """``expected`` stages ran in this order (other stages may run between them: graphs
    grow), and none of ``absent`` ran."""
    rest = iter(nodes)
    return all(name in rest for name in expected) and not set(absent) & set(nodes)


# --- the store file, read-only -----------------------------------------------------------

# Traces of every run (rejected ones included) are an audit log, not stored data.
_AUDIT_TABLES = {"runs"}


def _readonly(path: Path | str) -> apsw.Connection:
    return apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)


def _pg_rows(url: str) -> dict[str, list[str]]:
    """Every row of every table of a PostgreSQL store, as sorted text, in one snapshot."""
    import psycopg

    with psycopg.connect(url) as conn, conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        tables = [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
            "ORDER BY tablename")]
        return {t: sorted(str(r[0]) for r in conn.execute(f'SELECT t::text FROM "{t}" t'))
                for t in tables}


def db_digest(path: Path | str) -> str:
    """SHA-256 over every row of every real table (virtual tables through their shadow
    tables), except the trace log. Equal digests mean no stored data changed. ``path``:
    the SQLite file, or a PostgreSQL store's URL."""
    if str(path).startswith("postgresql://"):
        digest = hashlib.sha256()
        for table, rows in _pg_rows(str(path)).items():
            if table not in _AUDIT_TABLES:
                digest.update(f"{table}:{len(rows)}\n".encode())
                for row in rows:
                    digest.update(row.encode("utf-8", "surrogatepass"))
        return digest.hexdigest()
    conn = _readonly(path)
    try:
        digest = hashlib.sha256()
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' "
            "AND sql NOT LIKE 'CREATE VIRTUAL TABLE%' ORDER BY name")]
        conn.execute("BEGIN")
        try:
            for table in tables:
                if table in _AUDIT_TABLES:
                    continue
                sql = f'SELECT * FROM "{table}"'
                if table == "sqlite_sequence":
                    sql += " WHERE name NOT IN ('runs')"
                rows = sorted(repr(row) for row in conn.execute(sql))
                digest.update(f"{table}:{len(rows)}\n".encode())
                for row in rows:
                    digest.update(row.encode("utf-8", "surrogatepass"))
        finally:
            conn.execute("COMMIT")
        return digest.hexdigest()
    finally:
        conn.close()


def db_counts(path: Path | str) -> dict[str, int]:
    tables = ("sessions", "exchanges", "briefs", "brief_sources", "milestones")
    if str(path).startswith("postgresql://"):
        rows = _pg_rows(str(path))
        return {t: len(rows[t]) for t in tables}
    conn = _readonly(path)
    try:
        return {t: int(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0])
                for t in tables}
    finally:
        conn.close()


# --- raw stdio ------------------------------------------------------------------------------

class RawServer:
    """`python -m stenographer` spoken to byte by byte: nothing in between to tidy up
    what we send. Every wait is bounded; a reader thread turns stdout into a queue."""

    def __init__(self, data_dir: Path | str, **extra_env: str) -> None:
        self.data_dir = Path(data_dir)
        env = get_default_environment() | server_env(data_dir, **extra_env)
        self._stderr = open(self.data_dir / "server-stderr.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "stenographer"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self._stderr, env=env, cwd=str(REPO_ROOT))
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, name="raw-stdout", daemon=True)
        self._reader.start()
        self.pending: list[dict[str, Any]] = []  # read but not yet claimed by an id

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def send_bytes(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_bytes(json.dumps(message).encode() + b"\n")

    def next_message(self, timeout: float) -> dict[str, Any] | None:
        """The next JSON message on stdout, or None when none came within ``timeout``."""
        try:
            line = self.lines.get(timeout=max(timeout, 0.0))
        except queue.Empty:
            return None
        if line is None:
            raise AssertionError(f"the server closed stdout (exit code {self.proc.poll()})")
        message: dict[str, Any] = json.loads(line)
        return message

    def wait_for(self, request_id: Any, timeout: float = 30.0) -> dict[str, Any]:
        """The response to ``request_id`` (other messages are kept in ``pending``)."""
        for i, message in enumerate(self.pending):
            if message.get("id") == request_id:
                return self.pending.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            message = self.next_message(deadline - time.monotonic())
            if message is None:
                raise AssertionError(f"no response to id {request_id!r} within {timeout} s "
                                     f"(also received: {self.pending})")
            if message.get("id") == request_id and ("result" in message or "error" in message):
                return message
            self.pending.append(message)

    def drain(self, timeout: float) -> list[dict[str, Any]]:
        """Everything else that arrives within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while (message := self.next_message(deadline - time.monotonic())) is not None:
            self.pending.append(message)
        out, self.pending = self.pending, []
        return out

    def request(self, request_id: int, method: str, params: dict[str, Any] | None = None,
                timeout: float = 30.0) -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.wait_for(request_id, timeout)

    def call_tool(self, request_id: int, name: str, arguments: dict[str, Any],
                  timeout: float = 30.0) -> dict[str, Any]:
        return self.request(request_id, "tools/call", {"name": name, "arguments": arguments},
                            timeout)

    def initialize(self) -> dict[str, Any]:
        """The 2025 handshake, by hand, with the newest version it allows."""
        reply = self.request(0, "initialize", {
            "protocolVersion": HANDSHAKE_PROTOCOL_VERSIONS[-1],
            "capabilities": {},
            "clientInfo": {"name": "raw-test", "version": "0"},
        }, timeout=60.0)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return reply

    def close(self) -> None:
        try:
            if self.proc.stdin is not None and not self.proc.stdin.closed:
                try:
                    self.proc.stdin.close()
                except BrokenPipeError:
                    pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        finally:
            self._reader.join(timeout=10)
            if self.proc.stdout is not None:
                self.proc.stdout.close()
            self._stderr.close()

    def stderr_text(self) -> str:
        self._stderr.flush()
        return (self.data_dir / "server-stderr.log").read_text(errors="replace")
