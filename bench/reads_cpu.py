"""Where the read tools' CPU goes, in-process, on a kept store: per graph run, per
stage, and the keyword statement's parts. CPU time of this thread (``time.thread_time``),
the best of ``--passes`` passes over the same calls: unlike wall times, it barely moves
when other processes keep the cores busy, so two checkouts can be compared on a loaded
machine, one after the other.

Run from the repository root, on a store kept by ``ingest_query.py --keep`` (or built
with the same turns: ``make_turns``'s seed and session size)::

    python bench/reads_cpu.py /tmp/steno-bench-xxxx/ingest-20000-x16

The calls are bench/reads_ab.py's (query_history in a session, compact_guard with a
query, query_history across every session, get_brief). Reported per tool:

* graph run: ``App.run`` of the tool's graph (every stage, the runner and the stored
  trace; not the MCP server's JSON-RPC work);
* each stage: its node called alone (``nodes.context.call``) on the channels the run
  ended with, so the sum of the stages is below the run (the runner, the engine, the
  trace, and code that is colder inside a whole run);
* graph run, first use: each call once, in a new server's process (a new app on a copy
  of the store, set up and warmed as a server: ``Backend.serves``, ``App.warm``, its
  upkeep thread waited for), the p50 and mean: what an agent's first searches after a
  start cost, and a search with words the process has not searched for before (their
  counts over the whole index, or the common words a server reads:
  ``store.sqlite.doc_freq.Words``);
* the keyword statement of the three searches: matching only (``count(*)``), FTS5's
  ``bm25()`` of a single matching row (what bm25 pays before the first row: it counts
  each query phrase over the whole index), the whole ranked statement as written
  (``keyword_sql``, FTS5 counting the phrases' rows), and as a search runs it
  (``store.sqlite.search.keyword_hits``: with the phrases' kept document frequencies,
  ``store.sqlite.doc_freq``), the store as it is and with a turn stored before each
  statement (the ingest not timed: the counts are brought up to date by the new row).

A store built through the bulk path in batches longer than the keyword queue's bulk
size holds its FTS5 index in several segments: nothing merges them until a search finds
a long queue and the index upkeep runs (``store.sqlite.search.keep_merged``). A
server's store after single ingests is merged at its first search. ``--merged`` merges
the copy first, so that both kinds of store are measured in the state searches see.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import fmt_ms, kept_store_parser, print_table, served_app
from ingest_query import make_turns
from reads_ab import BRIEF, GUARD, QUERY, WIDE, _exchange_ids, calls

GRAPH = {QUERY: "search", GUARD: "guard", WIDE: "search", BRIEF: "notes"}


def best_cpu(passes: int, work: Callable[[], int]) -> float:
    """Seconds of this thread's CPU per item, the best of ``passes`` runs of ``work``
    (which returns how many items it did)."""
    best = float("inf")
    for _ in range(passes):
        started = time.thread_time()
        done = work()
        best = min(best, (time.thread_time() - started) / max(done, 1))
    return best


def first_use(store: Path, graph: str, todo: list[dict[str, Any]]) -> list[float]:
    """Seconds of CPU of each call of ``todo``, each run once in a new server's process:
    a new app on a copy of ``store``, set up and warmed as a server."""
    with served_app(store, "steno-reads-first-") as app:
        spent = []
        for a in todo:
            started = time.thread_time()
            app.run(graph, a)
            spent.append(time.thread_time() - started)
        return spent


def stage_cpu(app: Any, graph: str, outs: list[dict[str, Any]], passes: int
              ) -> list[tuple[str, float]]:
    """Each stage of ``graph`` that ran, its node called alone on every run's channels."""
    from nodes.context import call

    definition = app.graphs.definitions[graph]
    found = []
    for name, spec in definition["nodes"].items():
        fn = app.graphs.node_types.get(spec["type"])
        if fn is None:
            continue  # not reached by these calls
        cfg = {k: v for k, v in spec.items() if k != "type"}

        def work(fn: Any = fn, cfg: dict[str, Any] = cfg) -> int:
            for channels in outs:
                call(fn, channels, app.ctx, cfg)
            return len(outs)

        found.append((name, best_cpu(passes, work)))
    return found


def keyword_parts(app: Any, tool: str, plan: list[dict[str, Any]], passes: int
                  ) -> dict[str, float]:
    """The keyword statement of ``plan``'s searches in parts (see the module doc)."""
    from nodes.extract.query_terms import term_expression
    from store.search_filter import BM25_WEIGHTS, HitFilter
    from store.sqlite.search import keyword_hits, keyword_sql, match_expression

    with app.store.read() as conn:
        sessions = {str(n): int(i) for i, n in conn.execute("SELECT id, name FROM sessions")}
    statements = []
    searches = []
    for args in plan:
        expression = term_expression(args["query"])
        if expression is None:
            continue
        flt = HitFilter(session_id=sessions.get(args.get("session_id", "")),
                        compressed_only=tool == GUARD)
        match = match_expression(expression, flt)
        sql, params = keyword_sql(flt)
        statements.append((match, sql, params))
        searches.append((expression, flt))
    ingest_session = next(iter(sessions))
    weights = ", ".join(str(w) for w in BM25_WEIGHTS)
    parts = {
        "match only": lambda conn, m, sql, p: conn.execute(
            "SELECT count(*) FROM exchanges_fts WHERE exchanges_fts MATCH ?", (m,)).fetchall(),
        "bm25 of one row": lambda conn, m, sql, p: conn.execute(
            f"SELECT bm25(exchanges_fts, {weights}) FROM exchanges_fts"
            " WHERE exchanges_fts MATCH ?1 AND rowid = (SELECT rowid FROM exchanges_fts"
            " WHERE exchanges_fts MATCH ?1 LIMIT 1)", (m,)).fetchall(),
        "whole statement": lambda conn, m, sql, p: conn.execute(
            sql, (m, 100, *p)).fetchall(),
    }
    out = {}
    for label, run in parts.items():
        def work(run: Any = run) -> int:
            with app.store.read() as conn:
                for match, sql, params in statements:
                    run(conn, match, sql, params)
            return len(statements)
        out[label] = best_cpu(passes, work)

    def searched(ingest: bool) -> tuple[int, float]:
        spent = 0.0
        for expression, flt in searches:
            if ingest:
                app.run("ingest", {"role": "user", "session_id": ingest_session,
                                   "content": f"{expression} stored between searches"})
            started = time.thread_time()
            with app.store.read() as conn:
                keyword_hits(conn, expression, flt, 100)
            spent += time.thread_time() - started
        return len(searches), spent

    for label, ingest in (("as searched", False), ("as searched, a turn stored before each",
                                                    True)):
        best = float("inf")
        for _ in range(passes if not ingest else 1):
            done, spent = searched(ingest)
            best = min(best, spent / max(done, 1))
        out[label] = best
    return out


def main(argv: list[str] | None = None) -> int:
    p = kept_store_parser(__doc__, "a kept ingest-N-xM directory (steno.db)")
    p.add_argument("--calls", type=int, default=60, help="calls per tool (60)")
    p.add_argument("--passes", type=int, default=5, help="passes; the best counts (5)")
    p.add_argument("--merged", action="store_true",
                   help="merge the copy's FTS5 segments first (keep_merged)")
    args = p.parse_args(argv)

    from stenographer.app import open_app
    from stenographer.settings import Settings

    root = Path(tempfile.mkdtemp(prefix="steno-reads-cpu-"))
    try:
        shutil.copy(args.store / "steno.db", root / "steno.db")
        turns = make_turns(args.turns, session_turns=args.session_turns, seed=args.seed)
        ids = _exchange_ids(root / "steno.db", turns)
        plan = calls(turns, ids, queries=args.calls, briefs=args.calls, guards=args.calls,
                     seed=args.seed + 100)
        app = open_app(Settings(data_dir=root))
        if args.merged:
            from store.sqlite.search import keep_merged

            keep_merged(app.store)
        rows: list[list[Any]] = []
        load = [os.getloadavg()[0]]
        for tool in (QUERY, GUARD, WIDE, BRIEF):
            graph, todo = GRAPH[tool], plan[tool][: args.calls]
            outs = [app.run(graph, a)[0] for a in todo]  # warm: one-off copies, compiles

            def runs(graph: str = graph, todo: list[dict[str, Any]] = todo) -> int:
                for a in todo:
                    app.run(graph, a)
                return len(todo)

            name = tool.removeprefix("stenographer_")
            rows.append([name, "graph run", fmt_ms(1e3 * best_cpu(args.passes, runs))])
            first = first_use(args.store / "steno.db", graph, todo)
            rows.append([name, "graph run, first use: p50 / mean",
                         f"{fmt_ms(1e3 * statistics.median(first))} / "
                         f"{fmt_ms(1e3 * statistics.mean(first))}"])
            stages = stage_cpu(app, graph, outs, args.passes)
            rows += [[name, f"  stage {stage}", fmt_ms(1e3 * s)] for stage, s in stages]
            rows.append([name, "  sum of the stages", fmt_ms(1e3 * sum(s for _, s in stages))])
            if tool != BRIEF:
                for label, s in keyword_parts(app, tool, todo, args.passes).items():
                    rows.append([name, f"  keyword SQL: {label}", fmt_ms(1e3 * s)])
            load.append(os.getloadavg()[0])
        app.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print_table(["tool", "part", "CPU per call"], rows,
                title=f"read tools in-process on {args.store} ({args.turns:,} turns"
                      f"{', FTS5 merged' if args.merged else ''}; best of {args.passes} "
                      f"passes over {args.calls} calls)")
    print(f"load average (1 min) {min(load):.2f}-{max(load):.2f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
