"""Contract audit: time and peak memory on stores of 20,000 and 100,000 turns.

Each store is filled through the store layer (``record_turn`` and ``claim_brief``, the
functions the ingest and compress graphs publish with: real chain hashes, keyword and
vector index entries, briefs with their sources), in sessions of 1,000 turns with a
brief per 8 turns. Each audit then runs in a fresh process (``--measure``) so that its
peak resident memory is its own; the figures show whether memory grows with the store
(it should not: the audit reads bounded pages).

    python bench/audit.py [--turns 20000,100000] [--keep]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.common import fmt_bytes, print_table  # noqa: E402

WORDS = ("ledger parser deploy schema cache index vector brief session token queue retry "
         "worker build release migration config storage network latency").split()
SESSION_TURNS = 1_000
TURN_LIMIT = 8


def fill(path: Path, turns: int, seed: int = 5) -> float:
    """Write ``turns`` turns with briefs; returns seconds taken."""
    from store.briefs import BriefDraft, claim_brief
    from store.db import Store
    from store.exchanges import NewTurn, record_turn

    rng = random.Random(seed)
    store = Store(path, vector_dim=128)
    started = time.perf_counter()
    base = 1_760_000_000.0
    pending: dict[str, list[tuple[int, bytes, int]]] = {}
    try:
        for start in range(0, turns, 2_000):
            with store.write() as conn:
                for n in range(start, min(turns, start + 2_000)):
                    session = f"bench-{n // SESSION_TURNS}"
                    content = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 60)))
                    if n % 11 == 0:
                        content = f"Decision: {content}"
                    digest = hashlib.sha256(content.encode()).digest()
                    vector = bytes(rng.randrange(256) for _ in range(128))
                    rec = record_turn(conn, NewTurn(
                        session=session, role=("user", "assistant")[n % 2], content=content,
                        content_hash=digest, created_at=base + n, vector=vector))
                    batch = pending.setdefault(session, [])
                    batch.append((rec.exchange_id, digest, rec.session_id))
                    if len(batch) == TURN_LIMIT:
                        claim_brief(conn, BriefDraft(
                            session_id=rec.session_id, tier="B", created_at=base + n,
                            body=f"Turns #{batch[0][0]}-#{batch[-1][0]}",
                            sources=tuple((i, h) for i, h, _ in batch)))
                        pending[session] = []
    finally:
        store.close()
    return time.perf_counter() - started


def measure(data_dir: Path) -> dict[str, Any]:
    """Run the audit once in this process; report time, pages and memory."""
    from stenographer.app import open_app
    from stenographer.settings import Settings

    app = open_app(Settings(data_dir=data_dir, turn_limit=TURN_LIMIT))
    try:
        app.run("status", {})  # warm: graphs compiled, store open
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started = time.perf_counter()
        out, trace = app.run("contract_audit", {})
        seconds = time.perf_counter() - started
        rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        tracemalloc.start()  # a second run, traced (tracing slows it: not timed)
        app.run("contract_audit", {})
        _, traced_peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    finally:
        app.close()
    report = out["report"]
    return {"seconds": seconds, "pages": report["pages"], "passed": report["passed"],
            "turns": report["contracts"][0]["checked"],
            "python_peak_bytes": traced_peak, "rss_before_bytes": rss_before * 1024,
            "rss_peak_bytes": rss_after * 1024, "stages": len(trace["stages"])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", default="20000,100000")
    parser.add_argument("--keep", action="store_true", help="keep the stores")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return 0
    rows, results = [], []
    root = Path(tempfile.mkdtemp(prefix="steno-audit-bench-"))
    for turns in (int(t) for t in args.turns.split(",")):
        data = root / f"t{turns}"
        fill_s = fill(data / "steno.db", turns)
        proc = subprocess.run([sys.executable, __file__, "--measure", str(data)],
                              capture_output=True, text=True, check=True, cwd=REPO_ROOT)
        m = json.loads(proc.stdout.strip().splitlines()[-1])
        size = (data / "steno.db").stat().st_size
        results.append({"turns": turns, "fill_s": fill_s, "db_bytes": size, **m})
        rows.append([f"{turns:,}", fmt_bytes(size), f"{m['seconds']:.2f} s",
                     f"{turns / m['seconds']:,.0f}", str(m["pages"]),
                     fmt_bytes(m["python_peak_bytes"]),
                     f"{fmt_bytes(m['rss_before_bytes'])} → {fmt_bytes(m['rss_peak_bytes'])}",
                     "yes" if m["passed"] else "NO"])
    print_table(["turns", "store", "audit time", "turns/s", "pages",
                 "Python peak (tracemalloc)", "process RSS peak (before → after)",
                 "passed"], rows)
    load = os.getloadavg()[0]
    print(f"\nload average (1 min) {load:.2f} on {os.cpu_count()} CPUs: other processes on "
          "the host skew the times")
    print(json.dumps(results))
    if not args.keep:
        import shutil

        shutil.rmtree(root, ignore_errors=True)
    return 0 if all(r["passed"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
