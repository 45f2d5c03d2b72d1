"""The read tools of bench/ingest_query.py on a kept store, for one or more checkouts
side by side: alternated blocks of calls, so that each checkout sees the same load.

Run from the repository root, on a store kept by ``ingest_query.py --keep`` (its
``ingest-N-xM`` directory; the turns are rebuilt from the same seed)::

    python bench/reads_ab.py /tmp/steno-bench-xxxx/ingest-20000-x16 \\
        --repo base=/path/to/main/checkout --repo new=.

Each checkout's server runs on its own copy of the store. The tools: query_history in a
session, get_brief, compact_guard and query_history across every session. For every tool
the calls go in blocks of ``--block``, each block to every server in turn (the order
swaps from one block to the next), for ``--rounds`` rounds. Reported per checkout and
tool: client latency p50/p95 (SDK + stdio + graph), server CPU per call (user + system
of the server process over its blocks, so the stdio/JSON-RPC work is in it) and the
graph's own duration p50 from the stage trace.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    REPO_ROOT,
    CallTimer,
    Server,
    fmt_ms,
    kept_store_parser,
    print_table,
    spawn_server,
    wait_idle,
)
from ingest_query import (
    BRIEF,
    COMPONENT,
    GUARD,
    JOB,
    NOUN,
    PURPOSE,
    QUERY,
    TECH,
    Turn,
    build_queries,
    make_turns,
)

WIDE = "store-wide search"  # query_history with cross_session
TOOLS = (QUERY, BRIEF, GUARD, WIDE)
_TOOL = {QUERY: QUERY, BRIEF: BRIEF, GUARD: GUARD, WIDE: QUERY}


def _exchange_ids(db: Path, turns: list[Turn]) -> dict[int, int]:
    import apsw

    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        by_text = {str(c): int(i) for i, c in conn.execute("SELECT id, content FROM exchanges")}
    finally:
        conn.close()
    return {t.index: by_text[t.content] for t in turns if t.content in by_text}


def calls(turns: list[Turn], ids: dict[int, int], *, queries: int, briefs: int, guards: int,
          seed: int) -> dict[str, list[dict[str, Any]]]:
    """The same calls as ingest_query.read_phase."""
    sessions = sorted({t.session for t in turns})
    rng = random.Random(seed + 1)
    guard_args = []
    for i in range(guards):
        query = rng.choice([
            f"next steps on the {rng.choice(COMPONENT)} {rng.choice(NOUN)} handling",
            f"using {rng.choice(TECH)} for {rng.choice(PURPOSE)}",
            f"{rng.choice(JOB)} timeout on the {rng.choice(COMPONENT)}",
        ])
        guard_args.append({"session_id": sessions[i % len(sessions)], "query": query})
    queries_args = [args for _, args, _ in build_queries(turns, ids, queries, seed)]
    return {
        QUERY: queries_args,
        WIDE: [{"query": a["query"], "cross_session": True, "limit": a["limit"]}
               for a in queries_args[: max(1, queries // 2)]],
        BRIEF: [{"session_id": sessions[i % len(sessions)]} for i in range(briefs)],
        GUARD: guard_args,
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    store = args.store
    db = store / "steno.db"
    turns = make_turns(args.turns, session_turns=args.session_turns, seed=args.seed)
    ids = _exchange_ids(db, turns)
    plan = calls(turns, ids, queries=args.queries, briefs=args.briefs, guards=args.guards,
                 seed=args.seed + 100)
    root = Path(tempfile.mkdtemp(prefix="steno-reads-"))
    timers = {(name, tool): CallTimer(tool) for name, _ in args.repo for tool in TOOLS}
    cpu = {(name, tool): 0.0 for name, _ in args.repo for tool in TOOLS}
    load = [os.getloadavg()[0]]
    try:
        async with AsyncExitStack() as stack:
            servers: dict[str, Server] = {}
            for name, repo in args.repo:
                data = root / name
                data.mkdir()
                shutil.copy(db, data / "steno.db")
                servers[name] = await stack.enter_async_context(spawn_server(data, repo=repo))
            for server in servers.values():  # one-off costs (in-memory copies) first
                for tool in TOOLS:
                    await server.call(_TOOL[tool], plan[tool][0])
            for server in servers.values():  # and the index upkeep a first search starts
                await anyio.to_thread.run_sync(wait_idle, server.pid)
            names = list(servers)
            for rnd in range(args.rounds):
                for tool in TOOLS:
                    todo = plan[tool]
                    for block, lo in enumerate(range(0, len(todo), args.block)):
                        order = names if (block + rnd) % 2 == 0 else names[::-1]
                        for name in order:
                            server = servers[name]
                            before = server.cpu_s() or 0.0
                            for call_args in todo[lo:lo + args.block]:
                                await timers[(name, tool)].call(server, _TOOL[tool],
                                                                call_args)
                            cpu[(name, tool)] += (server.cpu_s() or 0.0) - before
                load.append(os.getloadavg()[0])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    out: dict[str, Any] = {"load_1min": load, "tools": {}}
    for (name, tool), timer in timers.items():
        s = timer.summary()
        out["tools"].setdefault(tool, {})[name] = {
            "calls": s["calls"], "errors": s["errors"],
            "client_p50_ms": s["latency_ms"].get("p50"),
            "client_p95_ms": s["latency_ms"].get("p95"),
            "server_cpu_ms_per_call": 1e3 * cpu[(name, tool)] / max(s["calls"], 1),
            "graph_p50_ms": s["server_graph_ms"].get("p50"),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    p = kept_store_parser(
        __doc__, "a kept ingest-N-xM directory (steno.db)",
        "NAME=PATH of a checkout to run (repeatable; default this one)")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--briefs", type=int, default=100)
    p.add_argument("--guards", type=int, default=100)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--block", type=int, default=10)
    args = p.parse_args(argv)
    args.repo = args.repo or [("this", REPO_ROOT)]
    started = time.perf_counter()
    report = anyio.run(run, args)
    rows = []
    for tool, by_name in report["tools"].items():
        for name, r in by_name.items():
            rows.append([tool.removeprefix("stenographer_"), name, r["calls"],
                         f"{fmt_ms(r['client_p50_ms'])} / {fmt_ms(r['client_p95_ms'])}",
                         fmt_ms(r["server_cpu_ms_per_call"]), fmt_ms(r["graph_p50_ms"]),
                         r["errors"]])
    print_table(["tool", "checkout", "calls", "client p50 / p95", "server CPU / call",
                 "graph p50", "errors"], rows,
                title=f"read tools on {args.store} ({args.turns:,} turns)")
    load = report["load_1min"]
    print(f"load average (1 min) {min(load):.2f}-{max(load):.2f} on {os.cpu_count()} CPUs; "
          f"{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
