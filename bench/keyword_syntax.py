"""Queries written in FTS5 syntax on a kept store: the derived keyword index's answers
against FTS5's, and their time, in this process.

Run from the repository root on a store kept by ``bench/scale.py --keep DIR``::

    python bench/keyword_syntax.py DIR/sqlite/steno.db [--queries 20] [--seed 7]
        [--scope store,session]

The expressions are the FTS5-syntax forms of bench/ingest_query.build_queries (a quoted
phrase OR a word, a prefix AND a word, a NEAR group of two words) and others the search
accepts (a prefix OR a word, a phrase AND a word, a NEAR group of a phrase and a word, a
group AND a prefix), over the same vocabulary: ``--queries`` of each form, asked of the
whole store and of a session (``--scope``), 100 candidates as the search asks
(nodes.load_evidence.hits). For each: FTS5's hits (``store.sqlite.search.keyword_hits``,
as the store ran every such query before) and the derived index's
(``KeywordIndex.search_syntax``). Figures: how many expressions the index answered, how
many have FTS5's top 10 in FTS5's order, the mean overlap of the top 100, the largest
relative difference of a score, and p50 / p95 / max milliseconds of each, with the
machine's load average.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO_ROOT, percentile
from ingest_query import COMPONENT, NOUN, TECH

sys.path.insert(0, str(REPO_ROOT))

from store.db import Store
from store.search_filter import HitFilter
from store.sqlite import search as fts5_search

CANDIDATES = 100


def expressions(count: int, seed: int) -> list[tuple[str, str]]:
    """(form, expression), ``count`` of each form."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        noun = rng.choice(NOUN)
        out += [
            ("phrase OR word", f'"{rng.choice(COMPONENT)}" OR {rng.choice(TECH)}'),
            ("prefix AND word", f"migrat* {rng.choice(NOUN)}"),
            ("NEAR of words", f"NEAR({rng.choice(NOUN)} cache, 5)"),
            ("prefix OR word", f"{noun[:4]}* OR {rng.choice(TECH)}"),
            ("phrase AND word", f'"{rng.choice(COMPONENT)}" {rng.choice(NOUN)}'),
            ("NEAR of a phrase", f'NEAR("{rng.choice(COMPONENT)}" {rng.choice(NOUN)}, 10)'),
            ("OR AND prefix", f"({rng.choice(NOUN)} OR {rng.choice(TECH)}) AND deploy*"),
        ]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("store", type=Path)
    p.add_argument("--queries", type=int, default=20, help="per form")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--scope", default="store,session")
    args = p.parse_args(argv)
    store = Store(args.store)
    derived = store.keywords
    load = [os.getloadavg()[0]]
    with store.read() as conn:
        sessions = [int(r[0]) for r in conn.execute(
            "SELECT id FROM sessions ORDER BY id DESC LIMIT 50")]
        rng = random.Random(args.seed)
        for scope in args.scope.split(","):
            answered = equal10 = 0
            overlap, worst = 0.0, 0.0
            fts5_ms: list[float] = []
            derived_ms: list[float] = []
            left: list[str] = []
            for form, expression in expressions(args.queries, args.seed):
                session = rng.choice(sessions) if scope == "session" else None
                flt = HitFilter(session_id=session)
                started = time.perf_counter()
                expected = fts5_search.keyword_hits(conn, expression, flt, CANDIDATES,
                                                    caller_syntax=True)
                fts5_ms.append((time.perf_counter() - started) * 1e3)
                started = time.perf_counter()
                syntax = derived.syntax(expression)
                got = None if syntax is None else derived.search_syntax(
                    conn, syntax, session, CANDIDATES)
                if got is None:
                    left.append(f"{form}: {expression}")
                    continue
                derived_ms.append((time.perf_counter() - started) * 1e3)
                answered += 1
                equal10 += [i for i, _ in got[:10]] == [i for i, _ in expected[:10]]
                overlap += len({i for i, _ in got} & {i for i, _ in expected}) / len(
                    expected) if expected else float(not got)
                scores = dict(expected)
                worst = max([worst, *(abs(scores[i] - s) / abs(s) for i, s in got
                                      if i in scores and s)])
            total = len(fts5_ms)
            print(f"{scope}: {answered} of {total} expressions answered by the derived index; "
                  f"top 10 equal to FTS5's {equal10}/{answered}, top-{CANDIDATES} overlap "
                  f"{overlap / max(answered, 1):.4f}, largest score difference {worst:.1e}")
            for name, ms in (("FTS5", fts5_ms), ("derived", derived_ms)):
                if ms:
                    print(f"  {name:8s} p50 {percentile(ms, 50):7.1f} ms  p95 "
                          f"{percentile(ms, 95):7.1f}  max {max(ms):7.1f}")
            for expression in left:
                print(f"  left to FTS5: {expression}")
            load.append(os.getloadavg()[0])
    print(f"load average (1 min) at start and after each scope: "
          f"{', '.join(f'{x:.2f}' for x in load)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
