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
too, one after the other on fresh stores. ``--bulk N`` starts each from a store of N
turns more, written before by this checkout through the bulk path (``ingest_batch``, as
capture and import write), so that a session past the derived keyword index's size
(``KeywordIndex.answers_from``) does not take a hundred thousand single ingests first.
``--backend postgresql`` runs it on PostgreSQL 18 started on 127.0.0.1 by
``tests.pg_server`` (a database per checkout: the bulk store's copy by ``TEMPLATE``).

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from backends import Backends
from common import REPO_ROOT, RawClient, percentile, print_table, repo_arg
from ingest_query import INGEST, QUERY, Turn, ingest_request, make_turns

BATCH = 2_000  # turns per ingest_batch run, as bench/scale.py writes them


def words_of(turn: Turn, rng: random.Random) -> str:
    """Three words of a turn, as an agent's short query."""
    words = [w.strip(".,;:()") for w in turn.content.split() if len(w) > 3]
    return " ".join(rng.sample(words, min(3, len(words))))


@dataclass
class Store:
    """Where one session's store lives: a data directory, and on PostgreSQL a database."""

    data_dir: Path
    url: str | None = None

    def env(self) -> dict[str, str]:
        return {"STENO_DATABASE_URL": self.url} if self.url else {}


def fresh(backends: Backends, backend: str, bulk: Store | None) -> Store:
    """A new store: empty, or a copy of ``bulk`` (its data directory, and on PostgreSQL
    its database as a template)."""
    data_dir, url = backends.fresh(backend, "working", None if bulk is None else bulk.url)
    if bulk is not None:
        shutil.rmtree(data_dir)
        shutil.copytree(bulk.data_dir, data_dir)
    return Store(data_dir, url)


def bulk_store(store: Store, turns: list[Turn]) -> None:
    """``turns`` written into the new ``store`` through ``ingest_batch``."""
    from stenographer.app import open_app
    from stenographer.settings import Settings

    app = open_app(Settings(data_dir=store.data_dir, database_url=store.url))
    try:
        for start in range(0, len(turns), BATCH):
            batch = turns[start:start + BATCH]
            out, _ = app.run("ingest_batch", {"turns": [ingest_request(t) for t in batch]})
            assert out["reply"]["stored"] == len(batch), out["reply"]["text"]
    finally:
        app.close()


def session(repo: Path, turns: list[Turn], args: argparse.Namespace,
            store: Store) -> list[dict[str, Any]]:
    """Every window's figures for one checkout on ``store``."""
    rng = random.Random(args.seed)
    windows: list[dict[str, Any]] = []
    try:
        with RawClient(store.data_dir, repo=repo, extra_env=store.env()) as raw:
            ingests: list[float] = []
            searches: dict[str, list[float]] = {"session": [], "store": []}
            cpu, clock = raw.cpu_s() or 0.0, time.perf_counter()
            for i, t in enumerate(turns, 1):
                ms, result = raw.call(INGEST, ingest_request(t))
                if result.get("isError") or "error" in result:
                    raise SystemExit(f"ingest {i} failed: {result}")
                ingests.append(ms)
                if i % args.search_every == 0 or i % args.wide_every == 0:
                    recent = [u for u in turns[max(0, i - 50):i] if u.session == t.session]
                    query: dict[str, Any] = {"query": words_of(rng.choice(recent), rng)}
                    wide = i % args.wide_every == 0
                    if wide:
                        query["cross_session"] = True
                    else:
                        query["session_id"] = t.session
                    ms, result = raw.call(QUERY, query)
                    if result.get("isError") or "error" in result:
                        raise SystemExit(f"search after turn {i} failed: {result}")
                    searches["store" if wide else "session"].append(ms)
                if i % args.window == 0 or i == len(turns):
                    now = raw.cpu_s() or 0.0
                    windows.append({
                        "turns": i, "ingest_p50": percentile(ingests, 50),
                        "ingest_p99": percentile(ingests, 99),
                        **{f"{kind}_p50": percentile(ms, 50) if ms else None
                           for kind, ms in searches.items()},
                        "cpu_ms_per_turn": (now - cpu) * 1e3 / len(ingests),
                        "seconds": time.perf_counter() - clock})
                    ingests, cpu, clock = [], now, time.perf_counter()
                    searches = {"session": [], "store": []}
    finally:
        shutil.rmtree(store.data_dir, ignore_errors=True)
    return windows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--turns", type=int, default=20_000)
    p.add_argument("--session-turns", type=int, default=1000)
    p.add_argument("--search-every", type=int, default=200)
    p.add_argument("--wide-every", type=int, default=1000)
    p.add_argument("--window", type=int, default=2500)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    p.add_argument("--bulk", type=int, default=0,
                   help="turns written through the bulk path before the session (0)")
    p.add_argument("--repo", type=repo_arg, action="append",
                   help="NAME=PATH of a checkout (default: this one)")
    args = p.parse_args()
    every = make_turns(args.bulk + args.turns, session_turns=args.session_turns,
                       seed=args.seed)
    turns = every[args.bulk:]
    backends = Backends(Path(tempfile.mkdtemp(prefix="steno-working-")), [args.backend])
    try:
        bulk = None
        if args.bulk:
            bulk = Store(*backends.fresh(args.backend, "working_bulk"))
            started = time.perf_counter()
            bulk_store(bulk, every[:args.bulk])
            print(f"{args.bulk:,} turns written through the bulk path in "
                  f"{time.perf_counter() - started:.0f} s")
        for name, repo in args.repo or [("this", REPO_ROOT)]:
            store = fresh(backends, args.backend, bulk)
            report(name, repo, session(repo, turns, args, store), args)
    finally:
        backends.close()
        shutil.rmtree(backends.root, ignore_errors=True)
    return 0


def report(name: str, repo: Path, windows: list[dict[str, Any]],
           args: argparse.Namespace) -> None:
    took = sum(w["seconds"] for w in windows)
    print(f"\n{name} ({repo}, {args.backend}): {args.turns:,} turns after {args.bulk:,} in "
          f"{took:.0f} s, "
          f"a session search every {args.search_every} turns and a store-wide one every "
          f"{args.wide_every}")
    print_table(["turns", "ingest p50 ms", "ingest p99 ms", "session search p50 ms",
                 "store-wide search p50 ms", "server CPU ms/turn"],
                [[f"{w['turns']:,}", f"{w['ingest_p50']:.2f}", f"{w['ingest_p99']:.1f}",
                  *("-" if w[k] is None else f"{w[k]:.1f}" for k in ("session_p50", "store_p50")),
                  f"{w['cpu_ms_per_turn']:.2f}"] for w in windows])
    print(f"last window's ingest p50 / first window's: "
          f"{windows[-1]['ingest_p50'] / windows[0]['ingest_p50']:.2f}")


if __name__ == "__main__":
    raise SystemExit(main())
