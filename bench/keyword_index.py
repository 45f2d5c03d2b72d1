"""The keyword index alone: FTS5 as the store uses it, FTS5 variants, and Tantivy, on the
same corpus and the same queries, at growing sizes.

Run from the repository root::

    python bench/keyword_index.py [--sizes 20000,100000,1000000] [--queries 200]
        [--candidates fts5,fts5-optimized,tantivy] [--json FILE]

The corpus is bench/ingest_query.make_turns text in sessions of 1,000 turns (as
bench/backends.py loads it), each turn with the keyword index's context and date
columns computed as ingest computes them; sizes are prefixes of the largest one. The
queries are bench/ingest_query.build_queries' (questions, keywords, FTS5 syntax), each
asked session-scoped and store-wide, turned into FTS5 expressions by the search graph's
own node (nodes.extract.query_terms). Only the keyword candidate list is timed (100
candidates, as nodes.load_evidence.hits asks for), in this process.

Candidates:

* ``fts5``: ``store.sqlite.search.keyword_hits`` on a store file that holds the tables it
  reads (``exchanges``, ``exchanges_fts`` of migration 2's shape): bm25() with the column
  weights, the length prior over the best POOL x limit.
* ``fts5-optimized``: the same after FTS5's ``optimize`` (every segment merged into one).
* ``tantivy``: the store's derived keyword index (``store.keyword_index``, Tantivy from
  PyPI) as a search runs it: a field of the turn's words, context and date, the turn's
  own words and date at half weight, the session an indexed integer; a session-scoped
  query requires the session's term; top-k by block-max WAND; the same length prior
  over the best POOL x limit. Queries written in FTS5 syntax go to FTS5, as in the store.

``--locomo`` adds the keyword candidates' recall alone on the LoCoMo dev split (each
conversation a session), for FTS5 and the derived index.

Figures per size and candidate: load time, index size, p50/p95/p99 of session-scoped
and store-wide searches (all queries, and the plain-language ones alone: "plain"), and
the overlap of each candidate's top 10 with fts5's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO_ROOT, fmt_bytes, summarize
from ingest_query import Turn, build_queries, make_turns

sys.path.insert(0, str(REPO_ROOT))

from store.search_filter import POOL

SESSION_TURNS = 1_000
CANDIDATES = 100
BATCH = 5_000

SQLITE_SCHEMA = """
CREATE TABLE exchanges(
  id INTEGER PRIMARY KEY, session_id INTEGER NOT NULL, role TEXT NOT NULL,
  content TEXT NOT NULL, created_at REAL NOT NULL, brief_id INTEGER);
"""


def entries(turns: list[Turn]) -> list[tuple[int, int, str, float, str, str, str]]:
    """(id, session, role, created_at, content, context, dated) as ingest indexes them."""
    from nodes.extract.terms import context_terms
    from nodes.load_evidence.neighbours import PREVIOUS_TURNS
    from store.neighbours import NEIGHBOUR_CHARS
    from store.search_filter import dated_terms

    recent: dict[str, list[str]] = {}
    out = []
    for t in turns:
        previous = recent.setdefault(t.session, [])
        when = datetime.fromisoformat(t.created_at.replace("Z", "+00:00")).timestamp()
        out.append((t.index + 1, int(t.session.rsplit("-", 1)[1]) + 1, t.role, when,
                    t.content, context_terms(t.content, previous), dated_terms(when)))
        previous.insert(0, t.content[:NEIGHBOUR_CHARS])
        del previous[PREVIOUS_TURNS:]
    return out


# --------------------------------------------------------------------------- fts5


class Fts5:
    def __init__(self, root: Path, name: str) -> None:
        import apsw

        from store.migrations import CREATE_FTS_WITH_FIELDS

        self.path = root / f"{name}.db"
        self.conn = apsw.Connection(str(self.path))
        self.conn.execute("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL")
        self.conn.execute(SQLITE_SCHEMA)
        self.conn.execute(CREATE_FTS_WITH_FIELDS)

    def load(self, rows: list[tuple[int, int, str, float, str, str, str]]) -> None:
        from store.sqlite.search import scope_token

        for lo in range(0, len(rows), BATCH):
            part = rows[lo:lo + BATCH]
            with self.conn:
                self.conn.executemany(
                    "INSERT INTO exchanges(id, session_id, role, created_at, content)"
                    " VALUES (?, ?, ?, ?, ?)", [r[:5] for r in part])
                self.conn.executemany(
                    "INSERT INTO exchanges_fts(rowid, body, context, dated, scope)"
                    " VALUES (?, ?, ?, ?, ?)",
                    [(r[0], r[4], r[5], r[6], scope_token(r[1])) for r in part])

    def optimize(self) -> None:
        with self.conn:
            self.conn.execute("INSERT INTO exchanges_fts(exchanges_fts) VALUES ('optimize')")

    def search(self, expression: str, session: int | None, caller: bool
               ) -> list[tuple[int, float]]:
        from store.search import HitFilter, keyword_hits

        return keyword_hits(self.conn, expression, HitFilter(session_id=session), CANDIDATES,
                            caller_syntax=caller)

    def size(self) -> int:
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return self.path.stat().st_size


# --------------------------------------------------------------------------- tantivy


class Tantivy:
    """The store's derived keyword index (``store.keyword_index.KeywordIndex``), its
    queue empty (a table in the FTS5 candidate's file); queries written in FTS5 syntax
    go to FTS5, as the store sends them."""

    def __init__(self, root: Path, fts: Fts5) -> None:
        from store.keyword_index import KeywordIndex

        self.fts = fts
        fts.conn.execute("CREATE TABLE IF NOT EXISTS keyword_pending(seq INTEGER PRIMARY KEY"
                         " AUTOINCREMENT, exchange_id INTEGER NOT NULL UNIQUE, context TEXT,"
                         " dated TEXT)")
        self.index = KeywordIndex(root / "tantivy")

    def load(self, rows: list[tuple[int, int, str, float, str, str, str]]) -> None:
        from store.keyword_index import REBUILD_HEAP, indexed

        index = self.index
        with index._writer(REBUILD_HEAP) as writer:
            for r in rows:
                writer.add_document(index._document(indexed((r[0], r[1], r[4], r[5], r[6]))))
            writer.commit()

    def optimize(self) -> None:
        pass

    def search(self, text: str, session: int | None, caller: bool
               ) -> list[tuple[int, float]]:
        from nodes.extract.query_terms import term_expression
        from store.keyword_syntax import plain_phrases

        if caller:
            return self.fts.search(text, session, caller)
        expression = term_expression(text)
        phrases = None if expression is None else plain_phrases(expression)
        if not phrases:
            return []
        return self.index.search(self.fts.conn, phrases, session, CANDIDATES)

    def depth(self, expression: str, session: int | None) -> float | None:
        """How far down the derived index's candidate order (Tantivy's approximate
        ranking) the last of FTS5's best POOL x CANDIDATES by bm25() lies, in units of
        POOL x CANDIDATES (what ``store.keyword_index.DEPTH`` must cover); None when FTS5
        finds nothing."""
        from store.keyword_syntax import plain_phrases
        from store.search_filter import BM25_WEIGHTS, HitFilter
        from store.sqlite.search import match_expression

        phrases = plain_phrases(expression)
        if phrases is None:
            return None
        weights = ", ".join(str(w) for w in BM25_WEIGHTS)
        best = [int(r[0]) for r in self.fts.conn.execute(
            f"SELECT rowid, bm25(exchanges_fts, {weights}) AS raw FROM exchanges_fts"
            " WHERE exchanges_fts MATCH ? ORDER BY raw LIMIT ?",
            (match_expression(expression, HitFilter(session_id=session)),
             POOL * CANDIDATES))]
        if not best:
            return None
        index = self.index
        tokens = list(dict.fromkeys(index._tokens(phrases)))
        searcher = index.index.searcher()
        query = index._query(tokens, index._weights(searcher, tokens, []), session)
        hits = searcher.search(query, 100 * POOL * CANDIDATES, count=False).hits
        order = {int(i): k for k, i in enumerate(
            searcher.fast_field_values("id", [a for _, a in hits]))}
        return (max(order.get(i, len(order)) for i in best) + 1) / (POOL * CANDIDATES)

    def size(self) -> int:
        path = self.index.directory
        return sum(p.stat().st_size for p in path.iterdir() if p.is_file())


# --------------------------------------------------------------------------- run


def queries_for(turns: list[Turn], count: int, seed: int) -> list[dict[str, Any]]:
    from nodes.extract.query_terms import term_expression, uses_fts_syntax

    ids = {t.index: t.index + 1 for t in turns}
    out = []
    for kind, args, _ in build_queries(turns, ids, count, seed):
        text = args["query"]
        caller = uses_fts_syntax(text)
        expression = text if caller else term_expression(text)
        if expression is None:
            continue
        session = int(args["session_id"].rsplit("-", 1)[1]) + 1
        out.append({"kind": kind, "text": text, "expression": expression,
                    "caller": caller, "session": session})
    return out


def timed(index: Any, name: str, queries: list[dict[str, Any]]
          ) -> tuple[dict[str, Any], dict[tuple[int, str], list[int]]]:
    out: dict[str, Any] = {}
    tops: dict[tuple[int, str], list[int]] = {}
    for scope in ("session", "store"):
        lat, plain = [], []
        for n, q in enumerate(queries):
            session = q["session"] if scope == "session" else None
            arg = q["text"] if name == "tantivy" else q["expression"]
            started = time.perf_counter()
            hits = index.search(arg, session, q["caller"])
            lat.append((time.perf_counter() - started) * 1e3)
            if not q["caller"]:
                plain.append(lat[-1])
            tops[(n, scope)] = [i for i, _ in hits[:10]]
        out[scope] = summarize(lat)
        out[scope + " plain"] = summarize(plain)
    return out, tops


def overlap(a: dict[tuple[int, str], list[int]], b: dict[tuple[int, str], list[int]],
            queries: list[dict[str, Any]], scope: str, plain_only: bool) -> float:
    shares = []
    for key, top in a.items():
        if key[1] != scope or (plain_only and queries[key[0]]["caller"]):
            continue
        if top:
            shares.append(len(set(top) & set(b.get(key, []))) / len(top))
    return round(sum(shares) / len(shares), 3) if shares else float("nan")


def locomo_recall(names: list[str], data: Path) -> dict[str, dict[str, float]]:
    """Keyword candidates alone on the LoCoMo file: each conversation a session, each
    question session-scoped; evidence recall@5/@10 of each candidate's ranking."""
    from locomo import load_conversations

    from nodes.extract.query_terms import term_expression, uses_fts_syntax

    conversations = load_conversations(data)
    fake: list[Turn] = []
    ids: dict[tuple[int, str], int] = {}
    for c, conv in enumerate(conversations):
        for turn in conv.turns:
            ids[(c, turn.dialog_id)] = len(fake) + 1
            fake.append(Turn(index=len(fake), session=f"locomo-{c:04d}", role=turn.role,
                             content=turn.content,
                             created_at=turn.created_at or "2023-01-01T00:00:00Z",
                             decision=None, blocker=None))
    rows = entries(fake)
    root = Path(tempfile.mkdtemp(prefix="keyword-locomo-"))
    out: dict[str, dict[str, float]] = {}
    try:
        fts = Fts5(root, "fts5")
        built = {"fts5": fts, "tantivy": Tantivy(root, fts)}
        for index in built.values():
            index.load(rows)
        for name in names:
            if name == "fts5-optimized":
                continue
            index = built[name]
            scores = {5: [], 10: []}
            for c, conv in enumerate(conversations):
                for q in conv.questions:
                    wanted = {ids[(c, e)] for e in q.evidence if (c, e) in ids}
                    if not wanted:
                        continue
                    caller = uses_fts_syntax(q.text)
                    arg = q.text if name == "tantivy" else (
                        q.text if caller else term_expression(q.text))
                    try:
                        hits = [] if arg is None else index.search(arg, c + 1, caller)
                    except ValueError:  # FtsSyntaxError: the graph falls back to the words
                        fallback = term_expression(q.text)
                        hits = [] if fallback is None else index.search(fallback, c + 1,
                                                                        False)
                    ranked = [i for i, _ in hits]
                    for k in scores:
                        scores[k].append(len(wanted & set(ranked[:k])) / len(wanted))
            out[name] = {f"recall@{k}": round(sum(v) / len(v), 3) for k, v in scores.items()}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="20000,100000,1000000")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--candidates", default="fts5,fts5-optimized,tantivy")
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--json", type=Path)
    p.add_argument("--locomo", type=Path, nargs="?", const=REPO_ROOT.parent / "shared" / "data"
                   / "locomo" / "locomo-dev.json",
                   help="also the keyword-only recall on a LoCoMo file (the dev split)")
    args = p.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    names = args.candidates.split(",")
    root = Path(tempfile.mkdtemp(prefix="keyword-index-"))
    report: dict[str, Any] = {"uptime": os.getloadavg(), "sizes": {}}
    print(f"load average at start: {os.getloadavg()}", flush=True)
    if args.locomo:
        report["locomo_keyword_only"] = locomo_recall(names, args.locomo)
        print(f"LoCoMo, keyword candidates alone: {report['locomo_keyword_only']}", flush=True)
    started = time.perf_counter()
    turns = make_turns(sizes[-1], session_turns=SESSION_TURNS)
    rows = entries(turns)
    print(f"corpus of {len(rows):,} turns in {time.perf_counter() - started:.0f} s", flush=True)
    indexes: dict[str, Any] = {}
    indexes["fts5"] = Fts5(root, "fts5")  # the tantivy candidate's caller-syntax queries too
    if "tantivy" in names:
        indexes["tantivy"] = Tantivy(root, indexes["fts5"])
    loaded = 0
    try:
        for size in sizes:
            part = rows[loaded:size]
            result: dict[str, Any] = {"load_s": {}, "bytes": {}, "latency_ms": {},
                                      "top10_overlap_with_fts5": {}}
            for name, index in indexes.items():
                t0 = time.perf_counter()
                index.load(part)
                result["load_s"][name] = round(time.perf_counter() - t0, 1)
            loaded = size
            queries = queries_for(turns[:size], args.queries, args.seed)
            tops: dict[str, Any] = {}
            for name in names:
                index = indexes["fts5" if name.startswith("fts5") else name]
                if name == "fts5-optimized":
                    t0 = time.perf_counter()
                    index.optimize()
                    result["load_s"]["optimize"] = round(time.perf_counter() - t0, 1)
                timed(index, name, queries[:10])  # warm the page cache
                result["latency_ms"][name], tops[name] = timed(index, name, queries)
                result["bytes"][name] = index.size()
            if "fts5" in tops:
                for name in names:
                    result["top10_overlap_with_fts5"][name] = {
                        scope: {"all": overlap(tops["fts5"], tops[name], queries, scope, False),
                                "plain": overlap(tops["fts5"], tops[name], queries, scope,
                                                 True)}
                        for scope in ("session", "store")}
            if "tantivy" in names:
                result["depth"] = {
                    scope: summarize([d for d in (
                        indexes["tantivy"].depth(q["expression"],
                                                 q["session"] if scope == "session" else None)
                        for q in queries if not q["caller"]) if d is not None])
                    for scope in ("session", "store")}
            result["load_average"] = os.getloadavg()
            report["sizes"][size] = result
            print(f"\n== {size:,} turns (load average {os.getloadavg()[0]:.2f})")
            print(f"{'candidate':<16}{'scope':<15}{'p50':>9}{'p95':>9}{'p99':>9}{'max':>9}"
                  f"{'size':>10}{'top10 vs fts5':>15}")
            for name in names:
                for scope in ("session", "store", "session plain", "store plain"):
                    s = result["latency_ms"][name][scope]
                    ov = result["top10_overlap_with_fts5"].get(name, {}).get(scope, {})
                    print(f"{name:<16}{scope:<15}{s['p50']:>9.2f}{s['p95']:>9.2f}"
                          f"{s['p99']:>9.2f}{s['max']:>9.2f}"
                          f"{fmt_bytes(result['bytes'][name]):>10}"
                          f"{ov.get('plain', float('nan')):>15.3f}", flush=True)
            for scope, d in result.get("depth", {}).items():
                print(f"depth of FTS5's best {POOL * CANDIDATES} in the derived index's order"
                      f" ({scope}), x {POOL * CANDIDATES}: p50 {d['p50']:.2f} p95 {d['p95']:.2f}"
                      f" p99 {d['p99']:.2f} max {d['max']:.2f}", flush=True)
            print(f"load seconds: {result['load_s']}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
