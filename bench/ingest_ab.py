"""The single ingest over stdio for one or more checkouts side by side, each ingest
followed by the floor call (a call rejected by argument validation), in alternated
blocks so that every checkout sees the same load.

Run from the repository root::

    python bench/ingest_ab.py --repo base=/path/to/other/checkout --repo new=. \\
        [--turns 3000] [--block 100] [--sdk 500]

Each checkout's server (``python -m stenographer``) runs on a fresh store of its own,
spoken to with the raw JSON-RPC client (``common.RawClient``); the turns are
``ingest_query.make_turns``'s (sessions of 1,000 turns: compression runs every eighth
turn, as for a real session). After a warm-up, the turns go in blocks of ``--block``,
each block to every server in turn (the order swaps from one block to the next).
Reported per checkout: ingest p50/p95/p99/max and the floor's p50 measured beside it, their
ratio, sequential turns/s (the ingest calls' mean latency), the reply's size, the
server's CPU per ingest (its CPU over the pairs less the floor's, measured in blocks of
floor calls alone) and the share of it spent on other threads than the serving one (the
stage traces' writer, the keyword index's upkeep, the SDK's). ``--sdk N``: then N
sequential ingests per checkout with the SDK's own ``Client`` (alternated blocks too).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import RawClient, Server, percentile, print_table, repo_arg, spawn_server
from ingest_query import FLOOR_CALL, INGEST, make_turns

WARM = 100  # ingests (and floor calls) before anything is counted


def _threads_cpu_s(pid: int) -> tuple[float, float]:
    """CPU seconds of the process's main thread (the serving event loop) and of all the
    others, from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    main = other = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        cpu = (int(fields[11]) + int(fields[12])) / ticks
        if int(task.name) == pid:
            main += cpu
        else:
            other += cpu
    return main, other


class _Side:
    """One checkout's server and what was measured of it."""

    def __init__(self, name: str, repo: Path, root: Path) -> None:
        self.name = name
        self.raw = RawClient(root / name, repo=repo)
        self.lat: list[float] = []
        self.floor: list[float] = []
        self.sizes: list[int] = []
        self.errors: list[str] = []
        self.pair_cpu = [0.0, 0.0]  # main thread, others
        self.floor_cpu = [0.0, 0.0]
        self.floor_calls = 0

    def pairs(self, calls: list[dict[str, Any]], *, count: bool = True) -> None:
        main0, other0 = _threads_cpu_s(self.raw.pid)
        for args in calls:
            ms, result = self.raw.call(INGEST, args)
            if "error" in result or result.get("isError"):
                self.errors.append(str(result)[:300])
            fms, fresult = self.raw.call(*FLOOR_CALL)
            if not (fresult.get("isError") or "error" in fresult):
                raise RuntimeError(f"the floor call was not rejected: {fresult}")
            if count:
                self.lat.append(ms)
                self.floor.append(fms)
                self.sizes.append(len(json.dumps(result, ensure_ascii=False).encode()))
        main1, other1 = _threads_cpu_s(self.raw.pid)
        if count:
            self.pair_cpu[0] += main1 - main0
            self.pair_cpu[1] += other1 - other0

    def floors(self, calls: int) -> None:
        main0, other0 = _threads_cpu_s(self.raw.pid)
        for _ in range(calls):
            self.raw.call(*FLOOR_CALL)
        main1, other1 = _threads_cpu_s(self.raw.pid)
        self.floor_cpu[0] += main1 - main0
        self.floor_cpu[1] += other1 - other0
        self.floor_calls += calls

    def summary(self) -> dict[str, Any]:
        n = len(self.lat)
        floor_ms = [1e3 * c / self.floor_calls for c in self.floor_cpu]
        per = [1e3 * c / n - f for c, f in zip(self.pair_cpu, floor_ms, strict=True)]
        p50, f50 = percentile(self.lat, 50), percentile(self.floor, 50)
        return {"calls": n, "errors": len(self.errors), "error_samples": self.errors[:3],
                "p50_ms": p50, "p95_ms": percentile(self.lat, 95),
                "p99_ms": percentile(self.lat, 99), "max_ms": max(self.lat), "floor_p50_ms": f50,
                "ratio_p50": p50 / f50, "turns_per_s": 1e3 * n / sum(self.lat),
                "reply_bytes_p50": percentile(self.sizes, 50),
                "cpu_ms_per_ingest": sum(per), "cpu_ms_other_threads": per[1],
                "floor_cpu_ms": sum(floor_ms)}


def _args(turns: list[Any], prefix: str) -> list[dict[str, Any]]:
    return [{"role": t.role, "content": t.content, "session_id": f"{prefix}{t.session}",
             "created_at": t.created_at} for t in turns]


async def _sdk(sides: list[tuple[str, Path]], root: Path, turns: list[Any], block: int
               ) -> dict[str, dict[str, Any]]:
    """Sequential ingests with the SDK's ``Client``, alternated blocks."""
    servers: dict[str, Server] = {}
    lat: dict[str, list[float]] = {name: [] for name, _ in sides}
    from contextlib import AsyncExitStack

    async with AsyncExitStack() as stack:
        for name, repo in sides:
            servers[name] = await stack.enter_async_context(
                spawn_server(root / f"sdk-{name}", repo=repo))
        warm = _args(turns[:WARM], "warm-")
        for server in servers.values():
            for args in warm:
                await server.call(INGEST, args)
        todo = _args(turns[WARM:], "")
        names = list(servers)
        for k, lo in enumerate(range(0, len(todo), block)):
            for name in names if k % 2 == 0 else names[::-1]:
                for args in todo[lo:lo + block]:
                    started = time.perf_counter()
                    result = await servers[name].call(INGEST, args)
                    lat[name].append((time.perf_counter() - started) * 1e3)
                    if result.is_error:
                        raise RuntimeError(f"{name}: ingest failed: {result}")
    return {name: {"calls": len(v), "p50_ms": percentile(v, 50),
                   "turns_per_s": 1e3 * len(v) / sum(v)} for name, v in lat.items()}


def run(args: argparse.Namespace) -> dict[str, Any]:
    turns = make_turns(WARM + args.turns, session_turns=args.session_turns, seed=args.seed)
    root = Path(tempfile.mkdtemp(prefix="steno-ingest-ab-"))
    load = [os.getloadavg()[0]]
    sides: list[_Side] = []
    try:
        for name, repo in args.repo:
            sides.append(_Side(name, repo, root))
        warm = _args(turns[:WARM], "warm-")
        for side in sides:
            side.pairs(warm, count=False)
            side.floors(WARM)
        todo = _args(turns[WARM:], "")
        for k, lo in enumerate(range(0, len(todo), args.block)):
            for side in sides if k % 2 == 0 else sides[::-1]:
                side.pairs(todo[lo:lo + args.block])
                side.floors(args.block)
            load.append(os.getloadavg()[0])
        out: dict[str, Any] = {"raw": {s.name: s.summary() for s in sides}}
    finally:
        for side in sides:
            side.raw.close()
    try:
        if args.sdk:
            sdk_turns = make_turns(WARM + args.sdk, session_turns=args.session_turns,
                                   seed=args.seed + 1)
            out["sdk"] = anyio.run(_sdk, args.repo, root, sdk_turns, args.block)
            load.append(os.getloadavg()[0])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    out["load_1min"] = load
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repo", type=repo_arg, action="append", required=True,
                   help="NAME=PATH of a checkout (repeat)")
    p.add_argument("--turns", type=int, default=3000, help="ingests counted per checkout")
    p.add_argument("--block", type=int, default=100, help="calls per block (100)")
    p.add_argument("--sdk", type=int, default=0, help="ingests with the SDK Client (0)")
    p.add_argument("--session-turns", type=int, default=1000)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", type=Path, default=None, help="write the figures as JSON")
    args = p.parse_args(argv)
    out = run(args)
    raw = out["raw"]
    print_table(["checkout", "ingest p50", "p95", "p99", "max", "floor p50", "ratio", "turns/s",
                 "CPU/ingest", "other threads", "floor CPU", "reply B", "errors"],
                [[name, f"{r['p50_ms']:.2f}", f"{r['p95_ms']:.2f}", f"{r['p99_ms']:.2f}",
                  f"{r['max_ms']:.1f}",
                  f"{r['floor_p50_ms']:.2f}", f"{r['ratio_p50']:.2f}x",
                  f"{r['turns_per_s']:.0f}", f"{r['cpu_ms_per_ingest']:.2f}",
                  f"{r['cpu_ms_other_threads']:.2f}", f"{r['floor_cpu_ms']:.2f}",
                  f"{r['reply_bytes_p50']:.0f}", r["errors"]] for name, r in raw.items()])
    for name, r in out.get("sdk", {}).items():
        print(f"SDK Client, {name}: {r['turns_per_s']:.0f} turns/s, p50 {r['p50_ms']:.2f} ms "
              f"({r['calls']} ingests)")
    print("load (1 min):", ", ".join(f"{x:.2f}" for x in out["load_1min"]))
    if args.out is not None:
        args.out.write_text(json.dumps(out, indent=1))
    return 1 if any(r["errors"] for r in raw.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
