"""Sync: export and import throughput and bundle size on a store of 100,000 turns, and
push throughput between two local instances over HTTP.

The source store is filled through the store layer (``record_turn``: real content and
chain hashes, keyword entries) with synthetic turns of 8-60 words drawn, Zipf-weighted,
from the vocabulary of this repository's documentation and code (so the text is not a
handful of repeated words; real conversations repeat more and compress better). Export
and import each run in a fresh process, so that the peak resident memory printed is
theirs. Import computes everything an ingest computes (signals, vector, keyword fields)
and compresses every session as ingest would (STENO_TURN_LIMIT 8). The push goes from
this process's application to a real ``stenographer serve --http`` process.

    python bench/sync.py [--turns 100000] [--push-turns 20000] [--batch 500] [--keep]

Each step's rate is printed by the wall clock and per second of its process's CPU (with
the CPU of the worker process that computes most of an import's per-turn stages; the
second is what a busy machine leaves comparable), with the load at its end.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.common import fmt_bytes, print_table, worker_cpu_s  # noqa: E402

SESSION_TURNS = 500
TOKEN = "bench-sync-token-0123456789abcdef"


def vocabulary() -> list[str]:
    words: dict[str, int] = {}
    for pattern in ("*.md", "**/*.py"):
        for path in REPO_ROOT.glob(pattern):
            if ".venv" in path.parts:
                continue
            for w in re.findall(r"[A-Za-z][a-z]{2,}", path.read_text(errors="replace")):
                words[w.lower()] = words.get(w.lower(), 0) + 1
    return [w for w, _ in sorted(words.items(), key=lambda kv: -kv[1])]


def fill(data_dir: Path, turns: int, seed: int = 7) -> tuple[int, float]:
    """``turns`` turns in sessions of SESSION_TURNS; returns (text bytes, seconds)."""
    from store.db import Store
    from store.exchanges import NewTurn, record_turn

    vocab = vocabulary()
    weights = [1.0 / (rank + 1) for rank in range(len(vocab))]
    rng = random.Random(seed)
    store = Store(data_dir / "steno.db", vector_dim=128)
    text_bytes, started, base = 0, time.perf_counter(), 1_760_000_000.0
    try:
        for start in range(0, turns, 2_000):
            with store.write() as conn:
                for n in range(start, min(turns, start + 2_000)):
                    words = rng.choices(vocab, weights, k=rng.randint(8, 60))
                    content = " ".join(words).capitalize() + "."
                    if n % 11 == 0:
                        content = f"Decision: {content}"
                    data = content.encode()
                    text_bytes += len(data)
                    record_turn(conn, NewTurn(
                        session=f"bench-{n // SESSION_TURNS}", role=("user", "assistant")[n % 2],
                        content=content, content_hash=hashlib.sha256(data).digest(),
                        created_at=base + n, vector=bytes(128),
                        source_key=f"bench:{n}" if n % 3 == 0 else None))
    finally:
        store.close()
    return text_bytes, time.perf_counter() - started


def step(kind: str, data_dir: Path, bundle: Path) -> None:
    """One measured step in this (fresh) process; prints JSON."""
    from stenographer.app import open_app
    from stenographer.settings import Settings

    app = open_app(Settings(data_dir=data_dir))
    try:
        started, cpu = time.perf_counter(), time.process_time()
        if kind == "export":
            out, _ = app.run("sync_export", {"path": str(bundle)})
        else:
            out, _ = app.run("sync_import", {"path": str(bundle)})
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        cpu += worker_cpu_s(app)  # the import's per-turn stages' worker process, if started
    finally:
        app.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    reply = {k: v for k, v in out["reply"].items() if k != "text"}
    # the measured figures after the reply's: its own "seconds" leaves out what the
    # graph does after the reply is made (a bulk write's first derived-index build)
    print(json.dumps({**reply, "seconds": seconds, "cpu_seconds": cpu, "peak_rss": peak,
                      "load": os.getloadavg()[0]}))


def measured(kind: str, data_dir: Path, bundle: Path) -> dict[str, Any]:
    done = subprocess.run([sys.executable, __file__, "--step", kind, "--dir", str(data_dir),
                           "--bundle", str(bundle)], capture_output=True, text=True,
                          check=True, cwd=REPO_ROOT)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def push_between_instances(root: Path, turns: int, batch: int) -> dict[str, Any]:
    from stenographer.app import open_app
    from stenographer.settings import Settings
    from stenographer.sync import push

    fill(root / "pa", turns)
    port = free_port()
    env = {**os.environ, "OMEGA_STENOGRAPHER_DIR": str(root / "pb"),
           "STENO_HTTP_TOKEN": TOKEN, "PYTHONPATH": str(REPO_ROOT)}
    server = subprocess.Popen([sys.executable, "-m", "stenographer", "serve", "--http",
                               "--port", str(port)], env=env, cwd=REPO_ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        app = open_app(Settings(data_dir=root / "pa", sync_token=TOKEN, sync_batch=batch))
        try:
            started = time.perf_counter()
            outcome = push(app, f"http://127.0.0.1:{port}")
            seconds = time.perf_counter() - started
        finally:
            app.close()
    finally:
        server.terminate()
        server.wait(timeout=60)
    assert outcome.ok and outcome.applied == turns, outcome
    return {"turns": turns, "batches": outcome.batches, "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=100_000)
    parser.add_argument("--push-turns", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--step", choices=("export", "import"), help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--bundle", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.step:
        step(args.step, args.dir, args.bundle)
        return
    root = Path(tempfile.mkdtemp(prefix="steno-bench-sync-"))
    try:
        text_bytes, fill_s = fill(root / "a", args.turns)
        print(f"filled {args.turns:,} turns ({fmt_bytes(text_bytes)} of text) in {fill_s:.1f} s",
              flush=True)
        bundle = root / "a.zst"
        exp = measured("export", root / "a", bundle)
        imp = measured("import", root / "b", bundle)
        assert imp["applied"] == args.turns, imp
        size = bundle.stat().st_size
        rows = [[name, f"{args.turns / m['seconds']:,.0f}", f"{m['seconds']:.1f}",
                 f"{args.turns / m['cpu_seconds']:,.0f}", fmt_bytes(m["peak_rss"]),
                 f"{m['load']:.1f}"]
                for name, m in (("export", exp), ("import (verify + apply + compress)", imp))]
        print_table(["step", "turns/s", "seconds", "turns per CPU s", "peak RSS", "load 1m"],
                    rows)
        print(f"bundle: {size:,} bytes = {size / text_bytes:.1%} of the raw text "
              f"({fmt_bytes(text_bytes)}); {size * 1000 / args.turns:,.0f} bytes per "
              f"1,000 turns; import verified in the same run, {imp['sessions_compressed']:,} "
              "sessions compressed", flush=True)
        pushed = push_between_instances(root, args.push_turns, args.batch)
        print(f"push between two local instances: {pushed['turns']:,} turns in "
              f"{pushed['batches']} batches of {args.batch} in {pushed['seconds']:.1f} s = "
              f"{pushed['turns'] / pushed['seconds']:,.0f} turns/s")
    finally:
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
