"""A working session over stdio: single ingests with the agent's searches among them.

An agent records every turn and searches now and then while its store grows, so the
upkeep that a search starts (FTS5's merges, the derived keyword index's flush: on the
store's upkeep thread) runs beside the ingests that follow it. bench/ingest_query.py
times ingests and reads apart, one phase after the other; this one times them mixed:
``--turns`` turns (bench/ingest_query.make_turns: sessions of ``--session-turns``)
ingested one at a time by a raw JSON-RPC client, a query_history call in the current
session every ``--search-every`` turns and one across every session every
``--wide-every`` turns, three words of a recent turn of the session each. Per window of
``--window`` turns: the ingest's p50 and p99, the searches' p50, the server's CPU per
turn; then the last window's ingest p50 as a ratio to the first's (flat is the aim: the
store's size should not make a turn dearer). ``--repo NAME=PATH`` runs other checkouts
too, one after the other on fresh stores.

Run from the repository root::

    python bench/working_session.py [--turns 20000] [--repo base=../other --repo new=.]
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO_ROOT, RawClient, percentile, print_table, repo_arg
from ingest_query import INGEST, QUERY, Turn, make_turns


def words_of(turn: Turn, rng: random.Random) -> str:
    """Three words of a turn, as an agent's short query."""
    words = [w.strip(".,;:()") for w in turn.content.split() if len(w) > 3]
    return " ".join(rng.sample(words, min(3, len(words))))


def session(repo: Path, turns: list[Turn], args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every window's figures for one checkout on a fresh store."""
    root = Path(tempfile.mkdtemp(prefix="steno-working-"))
    rng = random.Random(args.seed)
    windows: list[dict[str, Any]] = []
    try:
        with RawClient(root / "store", repo=repo) as raw:
            ingests: list[float] = []
            searches: list[float] = []
            cpu = raw.cpu_s() or 0.0
            for i, t in enumerate(turns, 1):
                ms, result = raw.call(INGEST, {"role": t.role, "content": t.content,
                                               "session_id": t.session,
                                               "created_at": t.created_at})
                if result.get("isError") or "error" in result:
                    raise SystemExit(f"ingest {i} failed: {result}")
                ingests.append(ms)
                if i % args.search_every == 0 or i % args.wide_every == 0:
                    recent = turns[max(i - 50, i - 1 - (i - 1) % args.session_turns):i]
                    query: dict[str, Any] = {"query": words_of(rng.choice(recent), rng)}
                    if i % args.wide_every == 0:
                        query["cross_session"] = True
                    else:
                        query["session_id"] = t.session
                    ms, result = raw.call(QUERY, query)
                    if result.get("isError") or "error" in result:
                        raise SystemExit(f"search after turn {i} failed: {result}")
                    searches.append(ms)
                if i % args.window == 0 or i == len(turns):
                    now = raw.cpu_s() or 0.0
                    windows.append({
                        "turns": i, "ingest_p50": percentile(ingests, 50),
                        "ingest_p99": percentile(ingests, 99),
                        "search_p50": percentile(searches, 50) if searches else None,
                        "searches": len(searches),
                        "cpu_ms_per_turn": (now - cpu) * 1e3 / len(ingests)})
                    ingests, searches, cpu = [], [], now
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return windows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--turns", type=int, default=20_000)
    p.add_argument("--session-turns", type=int, default=1000)
    p.add_argument("--search-every", type=int, default=200)
    p.add_argument("--wide-every", type=int, default=1000)
    p.add_argument("--window", type=int, default=2500)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--repo", type=repo_arg, action="append",
                   help="NAME=PATH of a checkout (default: this one)")
    args = p.parse_args()
    turns = make_turns(args.turns, session_turns=args.session_turns, seed=args.seed)
    for name, repo in args.repo or [("this", REPO_ROOT)]:
        started = time.perf_counter()
        windows = session(repo, turns, args)
        print(f"\n{name} ({repo}): {args.turns:,} turns in "
              f"{time.perf_counter() - started:.0f} s, a session search every "
              f"{args.search_every} turns and a store-wide one every {args.wide_every}")
        print_table(["turns", "ingest p50 ms", "ingest p99 ms", "search p50 ms", "searches",
                     "server CPU ms/turn"],
                    [[f"{w['turns']:,}", f"{w['ingest_p50']:.2f}", f"{w['ingest_p99']:.1f}",
                      "-" if w["search_p50"] is None else f"{w['search_p50']:.1f}",
                      w["searches"], f"{w['cpu_ms_per_turn']:.2f}"] for w in windows])
        print(f"last window's ingest p50 / first window's: "
              f"{windows[-1]['ingest_p50'] / windows[0]['ingest_p50']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
