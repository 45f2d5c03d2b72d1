"""Bulk ingest, checkouts side by side: a capture first pass and an import of the same
turns, alternated, with each process's CPU per turn.

    python bench/bulk_ab.py --repo base=/path/to/old --repo new=. [--turns 100000]
        [--files 20] [--rounds 3] [--only capture|import]

The transcripts (``bench/capture.py``'s) and the bundle (``bench/sync.py``'s store,
exported) are made once by this checkout; each run is a fresh process of the checkout
under test on a fresh store (``Capturer.run_pass``; the ``sync_import`` graph). Printed
per checkout, medians over the rounds: turns/s by the wall clock, and µs of CPU a turn
of the writing process and of the worker process that computes most per-turn stages
(``nodes.turn_worker``). On a machine shared with other work the wall clock is noise;
the CPU a turn of the writing process bounds a run (the worker runs beside it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
KINDS = ("capture", "import")


def step(kind: str, root: Path, source: Path, data: Path) -> None:
    """One run in this (fresh) process, with the code of checkout ``root``."""
    sys.path.insert(0, str(root))
    from bench.common import worker_cpu_s
    from stenographer.app import open_app
    from stenographer.settings import Settings

    app = open_app(Settings(data_dir=data))
    try:
        started, cpu = time.perf_counter(), time.process_time()
        if kind == "capture":
            from stenographer.capture import Capturer, discover

            sources = discover(("claude-code", "codex"), source / "claude", source / "codex")
            turns = Capturer(app).run_pass(sources).captured
        else:
            out, _ = app.run("sync_import", {"path": str(source)})
            turns = out["reply"]["applied"]
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        worker = worker_cpu_s(app)
    finally:
        app.close()
    print(json.dumps({"turns": turns, "wall": wall, "cpu": cpu, "worker": worker,
                      "load": os.getloadavg()[0]}))


def measured(kind: str, root: Path, source: Path, tmp: Path) -> dict[str, Any]:
    data = tmp / "data"
    shutil.rmtree(data, ignore_errors=True)
    done = subprocess.run([sys.executable, __file__, "--step", kind, "--root", str(root),
                           "--source", str(source), "--data", str(data)],
                          capture_output=True, text=True, check=True, cwd=root)
    shutil.rmtree(data, ignore_errors=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def sources(tmp: Path, turns: int, files: int, kinds: list[str]) -> dict[str, Path]:
    sys.path.insert(0, str(REPO_ROOT))
    out: dict[str, Path] = {}
    if "capture" in kinds:
        from bench.capture import write_transcripts

        write_transcripts(tmp / "transcripts", turns, files)
        out["capture"] = tmp / "transcripts"
    if "import" in kinds:
        from bench.sync import fill

        fill(tmp / "filled", turns)
        bundle = tmp / "bundle.zst"
        subprocess.run([sys.executable, str(REPO_ROOT / "bench" / "sync.py"), "--step",
                        "export", "--dir", str(tmp / "filled"), "--bundle", str(bundle)],
                       check=True, capture_output=True, cwd=REPO_ROOT)
        out["import"] = bundle
    return out


def main() -> None:
    from bench.common import print_table, repo_arg

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repo", type=repo_arg, action="append",
                   help="NAME=PATH of a checkout (default: this one); repeat to compare")
    p.add_argument("--turns", type=int, default=100_000)
    p.add_argument("--files", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--only", choices=KINDS)
    args = p.parse_args()
    repos = args.repo or [("this", REPO_ROOT)]
    kinds = [args.only] if args.only else list(KINDS)
    tmp = Path(tempfile.mkdtemp(prefix="steno-bench-bulk-"))
    try:
        made = sources(tmp, args.turns, args.files, kinds)
        runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for n in range(args.rounds):
            for name, root in repos:
                for kind in kinds:
                    m = measured(kind, root, made[kind], tmp)
                    runs.setdefault((kind, name), []).append(m)
                    print(f"round {n + 1} {kind:7s} {name}: {m['turns']:,} turns, "
                          f"{m['turns'] / m['wall']:,.0f}/s, writer "
                          f"{m['cpu'] / m['turns'] * 1e6:.0f} µs, worker "
                          f"{m['worker'] / m['turns'] * 1e6:.0f} µs a turn, load "
                          f"{m['load']:.1f}", flush=True)
        rows = []
        for (kind, name), ms in runs.items():
            def med(key: str, ms: list[dict[str, Any]] = ms) -> float:
                return statistics.median(m[key] / m["turns"] for m in ms)

            rows.append([kind, name, f"{1 / med('wall'):,.0f}", f"{med('cpu') * 1e6:.0f}",
                         f"{med('worker') * 1e6:.0f}",
                         f"{(med('cpu') + med('worker')) * 1e6:.0f}",
                         f"{min(m['load'] for m in ms):.1f}-{max(m['load'] for m in ms):.1f}"])
        print_table(["step", "checkout", "turns/s", "writer µs/turn", "worker µs/turn",
                     "both µs/turn", "load 1m"], rows)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def step_main() -> None:
    """A run of one checkout: nothing of this checkout's code is imported first."""
    p = argparse.ArgumentParser()
    for arg in ("--root", "--source", "--data"):
        p.add_argument(arg, type=Path, required=True)
    p.add_argument("--step", choices=KINDS, required=True)
    args = p.parse_args()
    step(args.step, args.root, args.source, args.data)


if __name__ == "__main__":
    if "--step" in sys.argv:
        step_main()
    else:
        sys.path.insert(0, str(REPO_ROOT))
        main()
