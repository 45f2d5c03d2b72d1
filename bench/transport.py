"""Tool-call round trip over each transport: stdio, Streamable HTTP and legacy SSE.

Run from the repository root::

    python bench/transport.py [--calls 300] [--turns 60] [--out FILE.json]

For each transport a real server process on a fresh store (``python -m stenographer``
for stdio; ``python -m stenographer serve --http`` on 127.0.0.1 for HTTP and SSE) is driven by
the official SDK client. The store is seeded with ``--turns`` ingested turns (one
session; compression runs every 8), then each read tool is called ``--calls`` times in
sequence (after ``--warmup`` untimed calls): ``stenographer_capture_status`` and
``stenographer_query_history`` (keyword-and-vector search in that session).

Reported per transport and tool: client round trip p50 / p95 / p99, the server-side
graph time p50 (from the stage trace in every reply) and their difference, the cost of
the transport, framing, validation and the SDK on both sides. ``auto`` is the current
protocol (per-request envelope); ``legacy`` is the 2025 initialize handshake (a session).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    REPO_ROOT,
    CallTimer,
    Server,
    call_text,
    fmt_ms,
    percentile,
    print_table,
    spawn_server,
)
from mcp.client import Client
from mcp.client.sse import sse_client

INGEST = "stenographer_ingest_exchange"
QUERY = "stenographer_query_history"
STATUS = "stenographer_capture_status"
SESSION = "bench-transport"
READ_TIMEOUT_S = 120.0
START_TIMEOUT_S = 120.0

# (label, transport, handshake mode)
RUNS = [
    ("stdio", "stdio", "auto"),
    ("stdio legacy", "stdio", "legacy"),
    ("streamable-http", "http", "auto"),
    ("streamable-http legacy", "http", "legacy"),
    ("sse", "sse", "auto"),
    ("sse legacy", "sse", "legacy"),
]

TOPICS = ["the schema migration", "the retry policy", "the billing API", "the cache layer",
          "the ingest worker", "the release checklist"]


def turn(i: int) -> str:
    topic = TOPICS[i % len(TOPICS)]
    if i % 7 == 3:
        return f"We decided to rewrite {topic} with SQLite in WAL mode (step {i})."
    if i % 11 == 5:
        return f"The deploy is blocked by a failing test in {topic} (step {i})."
    return f"Step {i}: I reviewed {topic} and updated the notes for the team."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def http_server(data_dir: Path) -> AsyncIterator[str]:
    """A real HTTP server process; yields its base URL, stops it with SIGTERM."""
    port = free_port()
    env = {**os.environ, "OMEGA_STENOGRAPHER_DIR": str(data_dir),
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO_ROOT),
                                                     os.environ.get("PYTHONPATH")) if p)}
    stderr_path = data_dir.parent / f"{data_dir.name}-http-stderr.log"
    with stderr_path.open("wb") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "stenographer", "serve", "--http",
                                 "--port", str(port), "--no-token"], env=env,
                                cwd=str(REPO_ROOT), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:  # bounded polling with a TCP connect
            if proc.poll() is not None:
                raise RuntimeError(f"HTTP server exited {proc.returncode}: "
                                   f"{stderr_path.read_text(errors='replace')}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("HTTP server not listening") from None
                await anyio.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            code = await anyio.to_thread.run_sync(lambda: proc.wait(timeout=60))
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait(timeout=10)
        if code != 0:
            print(f"warning: HTTP server exited {code}", file=sys.stderr)


@asynccontextmanager
async def connected(transport: str, mode: str, data_dir: Path) -> AsyncIterator[Server]:
    if transport == "stdio":
        async with spawn_server(data_dir, stderr_name=f"stdio-{mode}.log",
                                read_timeout_s=READ_TIMEOUT_S) as server:
            yield server
        return
    data_dir.mkdir(parents=True, exist_ok=True)
    async with http_server(data_dir) as base:
        target: Any = (f"{base}/mcp" if transport == "http" else
                       sse_client(f"{base}/sse", sse_read_timeout=READ_TIMEOUT_S))
        started = time.perf_counter()
        async with Client(target, mode=mode, read_timeout_seconds=READ_TIMEOUT_S) as client:
            yield Server(client=client, data_dir=data_dir,
                         stderr_path=data_dir.parent / f"{data_dir.name}-http-stderr.log",
                         start_s=time.perf_counter() - started)


async def measure(server: Server, calls: int, warmup: int) -> dict[str, CallTimer]:
    query = {"query": "decided SQLite schema", "session_id": SESSION, "limit": 10}
    tools: dict[str, tuple[str, Callable[[], dict[str, Any]]]] = {
        "capture_status": (STATUS, dict),
        "query_history": (QUERY, lambda: dict(query)),
    }
    timers = {}
    for label, (tool, args) in tools.items():
        for _ in range(warmup):
            await server.call(tool, args())
        timer = CallTimer(label)
        for _ in range(calls):
            await timer.call(server, tool, args())
        timers[label] = timer
    return timers


async def run_all(args: argparse.Namespace) -> dict[str, Any]:
    report: dict[str, Any] = {
        "benchmark": "transport",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "mcp": metadata.version("mcp"),
        "calls": args.calls, "warmup": args.warmup, "turns": args.turns,
        "results": [],
    }
    with tempfile.TemporaryDirectory(prefix="steno-bench-transport-") as tmp:
        for label, transport, mode in RUNS:
            if args.only and transport not in args.only:
                continue
            data_dir = Path(tmp) / label.replace(" ", "-")
            async with connected(transport, mode, data_dir) as server:
                for i in range(args.turns):
                    result = await server.call(INGEST, {"role": ("user", "assistant")[i % 2],
                                                        "content": turn(i), "session_id": SESSION})
                    if result.is_error:  # a broken server measures nothing
                        raise RuntimeError(f"{label}: seeding failed: {call_text(result)}")
                timers = await measure(server, args.calls, args.warmup)
            for tool, timer in timers.items():
                lat, srv = timer.latencies_ms, timer.server_ms
                report["results"].append({
                    "transport": label, "tool": tool, "calls": len(lat),
                    "errors": len(timer.errors), "error_samples": timer.errors[:3],
                    "p50_ms": percentile(lat, 50), "p95_ms": percentile(lat, 95),
                    "p99_ms": percentile(lat, 99), "mean_ms": sum(lat) / max(len(lat), 1),
                    "server_p50_ms": percentile(srv, 50),
                    "overhead_p50_ms": percentile(lat, 50) - percentile(srv, 50),
                })
            print(f"  {label}: done", file=sys.stderr, flush=True)
    return report


def print_report(report: dict[str, Any]) -> None:
    rows = [[r["transport"], r["tool"], r["calls"], fmt_ms(r["p50_ms"]), fmt_ms(r["p95_ms"]),
             fmt_ms(r["p99_ms"]), fmt_ms(r["server_p50_ms"]), fmt_ms(r["overhead_p50_ms"]),
             r["errors"]] for r in report["results"]]
    print_table(["transport", "tool", "calls", "p50", "p95", "p99", "server p50",
                 "overhead p50", "errors"], rows,
                title=f"tools/call round trip ({report['calls']} calls each, "
                      f"{report['turns']}-turn store, {report['cpus']} CPUs, "
                      f"mcp {report['mcp']})")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=300, help="timed calls per tool (300)")
    p.add_argument("--warmup", type=int, default=10, help="untimed calls first (10)")
    p.add_argument("--turns", type=int, default=60, help="turns in the store (60)")
    p.add_argument("--only", nargs="*", choices=("stdio", "http", "sse"),
                   help="only these transports")
    p.add_argument("--out", type=Path, help="also write the figures as JSON here")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = anyio.run(run_all, args)
    print_report(report)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2), encoding="utf-8")
        print(f"wrote {args.out}", file=sys.stderr)
    return 1 if any(r["errors"] for r in report["results"]) else 0


if __name__ == "__main__":
    sys.exit(main())
