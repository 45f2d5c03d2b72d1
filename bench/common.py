"""Shared helpers for the benchmarks in ``bench/``.

* spawning the real stdio server (``python -m stenographer``) through the real MCP SDK
  client (``mcp.client.Client`` over ``mcp.client.stdio``), with a fresh store directory
  and the server's stderr captured to a file;
* timing tool calls and reading their replies (text content, structured content, the
  server-side stage trace);
* percentiles and a plain-text table printer;
* store-file measurements (size of ``steno.db`` and its WAL, checkpoint, ``dbstat``).

Run the benchmarks from the repository root (``python bench/<name>.py``); this module
puts the repository root on ``sys.path`` and spawns the server with ``cwd`` and
``PYTHONPATH`` set to it, so nothing has to be installed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from mcp.client import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp_types.version import LATEST_HANDSHAKE_VERSION  # noqa: E402

__all__ = [
    "REPO_ROOT",
    "Busy",
    "CallTimer",
    "RawClient",
    "Server",
    "call_text",
    "child_pids",
    "db_files",
    "db_measure",
    "fmt_bytes",
    "fmt_ms",
    "kept_store_parser",
    "percentile",
    "print_table",
    "process_cpu_s",
    "repo_arg",
    "server_params",
    "spawn_server",
    "structured",
    "summarize",
    "wait_idle",
    "worker_cpu_s",
]

def repo_arg(text: str) -> tuple[str, Path]:
    """A ``--repo NAME=PATH`` argument: a checkout to run, by the name it is reported as."""
    name, _, path = text.partition("=")
    if not name or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=PATH: {text!r}")
    return name, Path(path).resolve()


def kept_store_parser(doc: str, store: str, repo: str | None = None
                      ) -> argparse.ArgumentParser:
    """The arguments of a benchmark over a kept store (``store``), for checkouts side by
    side when it takes ``repo`` (``--repo``), and how the store's turns were generated
    (``--turns``, ``--session-turns``, ``--seed``: its queries are drawn from the same
    text)."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("store", type=Path, help=store)
    if repo is not None:
        p.add_argument("--repo", type=repo_arg, action="append", help=repo)
    p.add_argument("--turns", type=int, default=20_000, help="turns in the store (20000)")
    p.add_argument("--session-turns", type=int, default=1000)
    p.add_argument("--seed", type=int, default=7)
    return p


# A tool call should never take this long; a hung server fails the benchmark instead of
# stalling it forever.
READ_TIMEOUT_S = 120.0


# --------------------------------------------------------------------------- statistics


def percentile(values: Sequence[float], p: float) -> float:
    """The p-th percentile (0-100) with linear interpolation; NaN for no values."""
    if not values:
        return math.nan
    xs = sorted(values)
    if len(xs) == 1:
        return float(xs[0])
    rank = (len(xs) - 1) * p / 100.0
    lo = math.floor(rank)
    hi = min(lo + 1, len(xs) - 1)
    return float(xs[lo] + (xs[hi] - xs[lo]) * (rank - lo))


def summarize(values: Sequence[float]) -> dict[str, float | int]:
    """count, min, p50, p90, p95, p99, max and mean of a list of numbers."""
    if not values:
        return {"count": 0}
    return {
        "count": len(values),
        "min": float(min(values)),
        "p50": percentile(values, 50),
        "p90": percentile(values, 90),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "max": float(max(values)),
        "mean": float(statistics.fmean(values)),
    }


# --------------------------------------------------------------------------- formatting


def fmt_ms(value: float | None, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.{digits}f} ms"


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return "n/a"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


def print_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *,
                title: str | None = None, out: TextIO | None = None) -> None:
    """A plain-text table with left-aligned columns, a header rule and an optional title."""
    out = out or sys.stdout
    body = [[("" if c is None else str(c)) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in body:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=False)).rstrip()

    if title:
        print(title, file=out)
    print(line(list(headers)), file=out)
    print("  ".join("-" * w for w in widths), file=out)
    for row in body:
        print(line(row), file=out)
    out.flush()


# --------------------------------------------------------------------------- processes


def child_pids(parent: int | None = None) -> set[int]:
    """Direct children of ``parent`` (default: this process), from /proc (Linux only)."""
    parent = os.getpid() if parent is None else parent
    out: set[int] = set()
    proc = Path("/proc")
    if not proc.is_dir():
        return out
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == parent:
            out.add(int(entry.name))
    return out


def process_cpu_s(pid: int | None) -> float | None:
    """User + system CPU seconds of a process (all threads); None when unknown."""
    if pid is None:
        return None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def worker_cpu_s(app: Any) -> float:
    """CPU seconds so far of an app's worker process of the bulk path's per-turn stages
    (nodes.turn_worker; 0 before it starts, or for a checkout without one): a bulk
    benchmark's CPU per turn is this process's plus the worker's."""
    worker = getattr(app.ctx, "turn_worker", None)
    return process_cpu_s(None if worker is None else worker.pid) or 0.0


def wait_idle(pid: int | None, *, window_s: float = 1.0, share: float = 0.05,
              limit_s: float = 300.0) -> float:
    """Wait until the process ``pid`` uses less than ``share`` of a core over
    ``window_s`` (at most ``limit_s``); the seconds waited.

    After a run of ingests the server's first search starts one-off work on a thread
    of its own (the queued keyword entries moved into the derived index, then the FTS5
    segments merged: seconds of CPU after 20,000 single ingests); reads timed during it
    would measure that work, not the reads. A warm-up call, then this, keeps it apart.
    """
    started = time.perf_counter()
    before = process_cpu_s(pid)
    while before is not None and time.perf_counter() - started < limit_s:
        time.sleep(window_s)
        now = process_cpu_s(pid)
        if now is None or now - before < share * window_s:
            break
        before = now
    return time.perf_counter() - started


# --------------------------------------------------------------------------- the server


@contextmanager
def served_app(store_file: Path, prefix: str = "steno-bench-app-") -> Iterator[Any]:
    """A new app in this process on a copy of a kept store's file, set up and warmed as
    a server's (``Backend.serves``, ``App.warm``, its index upkeep waited for); closed
    and its copy removed after."""
    from stenographer.app import open_app
    from stenographer.settings import Settings

    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        shutil.copy(store_file, Path(tmp) / "steno.db")
        app = open_app(Settings(data_dir=Path(tmp)))
        try:
            app.store.serves()
            app.warm()
            upkeep = getattr(app.store, "upkeep", None)
            if upkeep is not None:
                upkeep.wait()
            yield app
        finally:
            app.close()


@contextmanager
def bytecode_caches() -> Iterator[None]:
    """Spawned servers read bytecode caches, as an installed package's processes do
    (pip compiles them at install): the caller's environment may forbid writing them
    (PYTHONDONTWRITEBYTECODE), which would recompile every module at every spawn, and a
    checkout other than this one is not to be written to, so they go to a private
    prefix for the benchmark's life (the first spawn of each kind writes them)."""
    saved = {k: os.environ.get(k) for k in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    with tempfile.TemporaryDirectory(prefix="steno-bench-pyc-") as prefix:
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        os.environ["PYTHONPYCACHEPREFIX"] = prefix
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def server_params(data_dir: Path, extra_env: Mapping[str, str] | None = None,
                  repo: Path = REPO_ROOT) -> StdioServerParameters:
    """``python -m stenographer`` (stdio) on a store in ``data_dir``, from the root of
    ``repo`` (this checkout unless another one is compared with it)."""
    pythonpath = os.pathsep.join(
        p for p in (str(repo), os.environ.get("PYTHONPATH", "")) if p)
    env = {"OMEGA_STENOGRAPHER_DIR": str(data_dir), "PYTHONPATH": pythonpath,
           # the coordination bus: none unless a benchmark names one (never the user's ~)
           "VERITAS_SHARED_DIR": str(data_dir / "veritas-shared")}
    env.update(extra_env or {})
    return StdioServerParameters(command=sys.executable, args=["-m", "stenographer"],
                                 env=env, cwd=str(repo))


@dataclass
class Server:
    """A connected client to one spawned server process."""

    client: Client
    data_dir: Path
    stderr_path: Path
    start_s: float  # spawn -> initialize (discover/initialize handshake) completed
    stop_s: float = math.nan  # set after the context exits: stdin closed -> process gone
    pid: int | None = None  # the server process, when it could be identified

    def cpu_s(self) -> float | None:
        """CPU seconds the server process has used so far (Linux)."""
        return process_cpu_s(self.pid)

    async def call(self, tool: str, args: dict[str, Any]) -> Any:
        return await self.client.call_tool(tool, args)

    def stderr_text(self) -> str:
        try:
            return self.stderr_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""


@asynccontextmanager
async def spawn_server(data_dir: Path, *, stderr_name: str = "server-stderr.log",
                       extra_env: Mapping[str, str] | None = None,
                       read_timeout_s: float = READ_TIMEOUT_S,
                       repo: Path = REPO_ROOT) -> AsyncIterator[Server]:
    """Spawn the stdio server through the MCP SDK client; yield a connected ``Server``.

    ``start_s`` is measured from just before the spawn to the end of
    ``Client.__aenter__`` (process start, imports, store open and migrations, and the
    protocol handshake). On exit the client closes the server's stdin and waits for the
    process to end (SDK policy: SIGTERM after 2 s), so the store is closed and its WAL
    checkpointed by the server itself.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    stderr_path = data_dir.parent / f"{data_dir.name}-{stderr_name}"
    with stderr_path.open("a", encoding="utf-8") as errlog:
        transport = stdio_client(server_params(data_dir, extra_env, repo), errlog=errlog)
        client = Client(transport, read_timeout_seconds=read_timeout_s)
        before = child_pids()
        started = time.perf_counter()
        await client.__aenter__()
        server = Server(client=client, data_dir=data_dir, stderr_path=stderr_path,
                        start_s=time.perf_counter() - started)
        new = child_pids() - before
        server.pid = new.pop() if len(new) == 1 else None
        try:
            yield server
        finally:
            stopping = time.perf_counter()
            await client.__aexit__(None, None, None)
            server.stop_s = time.perf_counter() - stopping


# --------------------------------------------------------------------------- replies


def call_text(result: Any) -> str:
    """The concatenated text content of a CallToolResult."""
    return "".join(getattr(c, "text", "") for c in (result.content or []))


def structured(result: Any) -> dict[str, Any]:
    value = getattr(result, "structured_content", None)
    return value if isinstance(value, dict) else {}


@dataclass
class CallTimer:
    """Client-side latencies, reply sizes and server-side stage timings of one tool."""

    name: str
    latencies_ms: list[float] = field(default_factory=list)
    reply_chars: list[int] = field(default_factory=list)
    server_ms: list[float] = field(default_factory=list)
    stage_ms: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    async def call(self, server: Server, tool: str, args: dict[str, Any]) -> Any:
        started = time.perf_counter()
        try:
            result = await server.call(tool, args)
        except Exception as ex:  # a transport or protocol failure is a finding, not a crash
            self.latencies_ms.append((time.perf_counter() - started) * 1e3)
            self.errors.append(f"{type(ex).__name__}: {ex}"[:300])
            return None
        self.latencies_ms.append((time.perf_counter() - started) * 1e3)
        self.record(result)
        return result

    def record(self, result: Any) -> None:
        text = call_text(result)
        self.reply_chars.append(len(text))
        if getattr(result, "is_error", False):
            self.errors.append(text[:300])
        trace = structured(result).get("trace") or {}
        if isinstance(trace.get("duration_ms"), (int, float)):
            self.server_ms.append(float(trace["duration_ms"]))
        for stage in trace.get("stages") or []:
            if isinstance(stage, dict) and isinstance(stage.get("duration_ms"), (int, float)):
                self.stage_ms.setdefault(str(stage.get("node")), []).append(
                    float(stage["duration_ms"]))

    def summary(self, budget_chars: int | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "calls": len(self.latencies_ms),
            "latency_ms": summarize(self.latencies_ms),
            "server_graph_ms": summarize(self.server_ms),
            "reply_chars": {
                "median": percentile(self.reply_chars, 50) if self.reply_chars else None,
                "max": max(self.reply_chars) if self.reply_chars else None,
            },
            "stages_ms_p50": {k: percentile(v, 50) for k, v in sorted(
                self.stage_ms.items(), key=lambda kv: -percentile(kv[1], 50))},
            "errors": len(self.errors),
            "error_samples": self.errors[:5],
        }
        if budget_chars is not None:
            over = sum(1 for n in self.reply_chars if n > budget_chars)
            out["budget_chars"] = budget_chars
            out["replies_over_budget"] = over
            out["within_budget"] = over == 0 and not self.errors
        return out


# --------------------------------------------------------------------------- store files


def db_files(data_dir: Path) -> dict[str, int]:
    """Sizes of steno.db, steno.db-wal and steno.db-shm (0 when absent)."""
    out = {}
    for suffix in ("", "-wal", "-shm"):
        path = data_dir / f"steno.db{suffix}"
        out[f"steno.db{suffix}"] = path.stat().st_size if path.exists() else 0
    return out


def db_measure(data_dir: Path) -> dict[str, Any]:
    """Open the (stopped) store with apsw, checkpoint (TRUNCATE), measure the main file.

    Also reports page and freelist counts and, when SQLite has ``dbstat``, the bytes
    used by each table and index (largest first).
    """
    import apsw  # the project's own dependency

    db = data_dir / "steno.db"
    out: dict[str, Any] = {}
    conn = apsw.Connection(str(db))
    try:
        out["checkpoint"] = list(conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone())
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        out.update(page_size=page_size, page_count=pages, freelist_pages=free,
                   freelist_bytes=free * page_size)
        try:
            rows = conn.execute(
                "SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC"
            ).fetchall()
            out["objects_bytes"] = {str(n): int(s) for n, s in rows}
        except apsw.Error as ex:
            out["objects_bytes_error"] = str(ex)
    finally:
        conn.close()
    out["files_after_checkpoint"] = db_files(data_dir)
    out["main_file_bytes"] = out["files_after_checkpoint"]["steno.db"]
    return out


# --------------------------------------------------------------------------- raw client


class RawClient:
    """``python -m stenographer`` spoken to with bare JSON-RPC lines over its pipes: one
    request written, its reply read, nothing else in the client (the SDK's ``Client``
    costs about as much CPU per call as the server's own floor, and on a busy machine
    it competes with the server for the same cores).

    ``spawn_s`` is measured from just before the spawn; ``first_reply_s`` (set by
    ``first_call``) to the reply of the first tool call after the handshake. ``argv``
    starts another command instead (another entry point, or another MCP server).
    """

    def __init__(self, data_dir: Path, *, repo: Path = REPO_ROOT,
                 extra_env: Mapping[str, str] | None = None,
                 stderr_name: str = "raw-stderr.log",
                 argv: Sequence[str] | None = None) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir = data_dir
        params = server_params(data_dir, extra_env, repo)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("STENO_", "OMEGA_"))}
        env.update(params.env or {})
        self.stderr_path = data_dir.parent / f"{data_dir.name}-{stderr_name}"
        self._stderr = self.stderr_path.open("ab")
        self.started = time.perf_counter()
        # ``argv``: another command line to serve instead (bench/noop_server.py)
        command = list(argv) if argv is not None else [params.command, *params.args]
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._stderr, env=env,
                                     cwd=params.cwd)
        self.pid = self.proc.pid
        self._next_id = 0
        self.first_reply_s = math.nan
        reply = self.request("initialize", {
            "protocolVersion": LATEST_HANDSHAKE_VERSION, "capabilities": {},
            "clientInfo": {"name": "bench-raw", "version": "0"}})
        if "result" not in reply:
            raise RuntimeError(f"initialize refused: {reply}")
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.handshake_s = time.perf_counter() - self.started

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one request and read lines until its reply (notifications skipped)."""
        assert self.proc.stdout is not None
        self._next_id += 1
        ident = self._next_id
        self._send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the server closed stdout (exit {self.proc.poll()}): "
                                   f"{self.stderr_text()[-2000:]}")
            message: dict[str, Any] = json.loads(line)
            if message.get("id") == ident:
                return message

    def call(self, tool: str, arguments: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        """(latency in ms, the CallToolResult as a dict; an ``error`` member for a
        JSON-RPC error)."""
        started = time.perf_counter()
        reply = self.request("tools/call", {"name": tool, "arguments": arguments})
        elapsed = (time.perf_counter() - started) * 1e3
        if math.isnan(self.first_reply_s):
            self.first_reply_s = time.perf_counter() - self.started
        return elapsed, reply.get("result") or {"error": reply.get("error")}

    def cpu_s(self) -> float | None:
        return process_cpu_s(self.pid)

    def stderr_text(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def close(self) -> float:
        """Close stdin and wait for the server to exit; returns the seconds it took."""
        started = time.perf_counter()
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        finally:
            if self.proc.stdout is not None:
                self.proc.stdout.close()
            self._stderr.close()
        return time.perf_counter() - started

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Busy:
    """One other process keeping a core busy (a spinning Python loop) while in use."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Busy:
        self.proc = subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        time.sleep(0.2)  # let the scheduler see it
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.kill()  # the process this object started, by its handle
            self.proc.wait(timeout=10)
            self.proc = None
