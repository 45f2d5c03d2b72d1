"""Ingest latency with the coordination bus in every state.

The real stdio server through the real MCP SDK client, one server per case, sequential
ingests into one session. Cases: no bus configured (``off``), bus file missing, a bus
with ``--events`` events of other tasks and none for this session (``ok``), the same
bus locked by another program (an exclusive lock held by this script for the whole
run: rollback-journal mode, so readers are locked out), and a corrupt bus file. Prints
client-side latency percentiles and the server-side time of the bus stages (from the
stage trace), and the latency of the one ingest that records a shutdown event.

    python bench/bus.py [--turns 300] [--events 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import apsw

from bench.common import fmt_ms, print_table, spawn_server, structured, summarize
from tests.busfile import emit, make_bus

INGEST = "stenographer_ingest_exchange"
SESSION = "bench-bus"


def fill(path: Path, events: int) -> None:
    conn = apsw.Connection(str(path))
    with conn:
        conn.executemany(
            "INSERT INTO events(task_id, event_type, payload, created_at) VALUES (?, ?, ?, ?)",
            ((f"task-{i % 500}", ("CLAEG_TERMINAL_SHUTDOWN", "STENO_EXCHANGE")[i % 2],
              json.dumps({"source": "bench", "n": i}), "2026-11-30T06:00:00Z")
             for i in range(events)))
    conn.close()


async def run_case(root: Path, case: str, turns: int, events: int) -> dict[str, Any]:
    data, shared = root / case / "data", root / case / "shared"
    env = {"VERITAS_SHARED_DIR": "off" if case == "off" else str(shared)}
    holder = None
    if case in ("ok", "locked", "record"):
        fill(make_bus(shared), events)
    if case == "corrupt":
        shared.mkdir(parents=True)
        (shared / "coordination.sqlite").write_bytes(b"\x00not a database" * 1_000)
    latencies, bus_ms, record_ms = [], [], None
    async with spawn_server(data, extra_env=env) as server:
        await server.call(INGEST, {"role": "user", "content": "warm-up", "session_id": "w"})
        if case == "locked":
            holder = apsw.Connection(str(shared / "coordination.sqlite"))
            holder.execute("BEGIN EXCLUSIVE")
        try:
            for i in range(turns):
                if case == "record" and i == turns // 2:
                    emit(shared / "coordination.sqlite", SESSION, reason="bench")
                started = time.perf_counter()
                result = await server.call(INGEST, {
                    "role": ("user", "assistant")[i % 2], "session_id": SESSION,
                    "content": f"turn {i}: routine progress on component c{i % 17}."})
                elapsed = (time.perf_counter() - started) * 1e3
                sc = structured(result)
                assert not result.is_error, result
                if sc.get("shutdowns"):
                    record_ms = elapsed
                latencies.append(elapsed)
                bus_ms.append(sum(s["duration_ms"] for s in sc["trace"]["stages"]
                                  if s["node"].startswith("bus_")))
        finally:
            if holder is not None:
                holder.execute("ROLLBACK")
                holder.close()
    return {"case": case, "client": summarize(latencies), "bus": summarize(bus_ms),
            "record_ms": record_ms}


async def main_async(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for case in ("off", "missing", "ok", "locked", "corrupt", "record"):
            r = await run_case(Path(tmp), case, args.turns, args.events)
            c, b = r["client"], r["bus"]
            rows.append([case, fmt_ms(c["p50"]), fmt_ms(c["p95"]), fmt_ms(c["max"]),
                         fmt_ms(b["p50"], 3), fmt_ms(b["max"], 3),
                         fmt_ms(r["record_ms"]) if r["record_ms"] else "-"])
        print_table(["bus", "ingest p50", "p95", "max", "bus stages p50", "bus max",
                     "recording ingest"], rows,
                    title=f"ingest over stdio, {args.turns} turns per case, bus with "
                          f"{args.events} events of other tasks")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--events", type=int, default=20_000)
    asyncio.run(main_async(parser.parse_args()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
