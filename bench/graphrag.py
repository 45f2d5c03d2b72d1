"""GraphRAG benchmark: batch extraction, communities and graph queries on a generated
corpus, and the LoCoMo multi-hop measurement of graph fusion.

Run from the repository root::

    python bench/graphrag.py                      # 100,000 generated turns
    python bench/graphrag.py --turns 20000 --json report.json
    python bench/graphrag.py --locomo             # LoCoMo dev split, category 1 fusion

Corpus mode: the turns of ``bench/ingest_query.py``'s generator (~300 characters of
agent-work text: components, files, modules, libraries, tickets, decisions, blockers;
sessions of 200 turns) are written straight into a fresh store with the store's own
``record_turn`` (keyword index included, zero vectors: this benchmark measures the
graph, not ingest), then the real graphs run in this process exactly as `stenographer
graphrag extract` runs them: ``graphrag_batch`` until nothing is pending, then
``graphrag_communities``; then ``graph_query`` for named entities of the corpus,
session-scoped and cross-session. Figures: extraction turns/s (wall clock, and per CPU
second of this process and the worker that extracts the next batch meanwhile, for
shared machines), peak RSS (this process plus the worker),
community detection time, query p50/p95 (graph run time in process, no transport).
``--prefetch 0`` extracts every batch in this process (STENO_GRAPHRAG_PREFETCH).

LoCoMo mode: every conversation is ingested through the ``ingest`` graph (as
bench/locomo.py does over stdio: speaker A user, B assistant, "<speaker>: <text>",
session dates), the graph is extracted, and each question of categories 1-4 is asked
through the ``search`` graph (session-scoped, hybrid); its evidence recall@10/@5 is
compared with rankings that fuse the graph's supporting turns for the question into the
search ranking: reciprocal-rank fusion (graph list weighted ``--graph-weight``), a bonus
for search candidates the graph supports, and the graph's two best new turns in places
9-10.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.common import percentile  # noqa: E402
from bench.ingest_query import COMPONENT, FILE, LIB, MODULE, TECH, make_turns  # noqa: E402

TARGETS = {"extract_tps": 2_000.0, "peak_rss_mb": 1_024.0}
SESSION_TURNS = 200
RRF_K = 60


def _rss_mb(who: int = resource.RUSAGE_SELF) -> float:
    return resource.getrusage(who).ru_maxrss / 1024.0


def _children_cpu_s() -> float:
    """CPU seconds of this process's finished children (the extraction worker)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def load_corpus(app: Any, n: int) -> float:
    """Write ``n`` generated turns with the store's ingest write; returns seconds."""
    from datetime import datetime

    from store.exchanges import NewTurn, record_turn

    started = time.perf_counter()
    zero = bytes(app.settings.vector_dim)
    turns = make_turns(n, session_turns=SESSION_TURNS)
    for start in range(0, n, 5_000):
        with app.store.write() as conn:
            for t in turns[start:start + 5_000]:
                when = datetime.fromisoformat(t.created_at.replace("Z", "+00:00")).timestamp()
                record_turn(conn, NewTurn(session=t.session, role=t.role, content=t.content,
                                          content_hash=b"", created_at=when, vector=zero))
    return time.perf_counter() - started


def extract(app: Any, batch_size: int | None) -> dict[str, Any]:
    batches, read, batch_ms = 0, 0, []
    started, cpu = time.perf_counter(), time.process_time()
    children_cpu = _children_cpu_s()
    while True:
        t0 = time.perf_counter()
        out, _ = app.run("graphrag_batch", {"batch_size": batch_size})
        batch_ms.append((time.perf_counter() - t0) * 1e3)
        read += out["published"]["turns"]
        batches += 1
        if out["published"]["remaining"] == 0:
            break
    seconds, cpu_s = time.perf_counter() - started, time.process_time() - cpu
    worker_cpu_s = 0.0
    if app.ctx.graph_prefetch is not None:  # reap the worker: its CPU counts too
        app.ctx.graph_prefetch.close()
        worker_cpu_s = _children_cpu_s() - children_cpu
    cpu_s += worker_cpu_s
    t0 = time.perf_counter()
    out, _ = app.run("graphrag_communities", {})
    communities_s = time.perf_counter() - t0
    # On a shared machine the wall clock counts other processes' time too; the CPU
    # seconds of this process say what one core of our own would do.
    return {"turns": read, "batches": batches, "seconds": round(seconds, 2),
            "cpu_s": round(cpu_s, 2), "worker_cpu_s": round(worker_cpu_s, 2),
            "turns_per_s": round(read / seconds, 1) if seconds else None,
            "turns_per_cpu_s": round(read / cpu_s, 1) if cpu_s else None,
            "batch_ms_p50": round(percentile(batch_ms, 50), 1),
            "communities_s": round(communities_s, 2), "detection": out["detection"]}


def queries(app: Any, count: int) -> dict[str, Any]:
    names = TECH + COMPONENT + FILE + LIB + MODULE
    scoped, crossed, found = [], [], 0
    for i in range(count):
        name = names[i % len(names)]
        for cross, bucket in ((False, scoped), (True, crossed)):
            request = {"query": f"what is connected to {name}?", "hops": 2, "limit": 10,
                       "cross_session": cross,
                       "session_id": None if cross else f"bench-{i % 50:04d}"}
            t0 = time.perf_counter()
            out, _ = app.run("graph_query", request)
            bucket.append((time.perf_counter() - t0) * 1e3)
            found += bool(out["graph_result"]["turns"])
    return {"queries": 2 * count, "with_turns": found,
            "session_p50_ms": round(percentile(scoped, 50), 2),
            "session_p95_ms": round(percentile(scoped, 95), 2),
            "cross_p50_ms": round(percentile(crossed, 50), 2),
            "cross_p95_ms": round(percentile(crossed, 95), 2)}


def run_corpus(n: int, batch_size: int | None, query_count: int,
               prefetch: int | None = None) -> dict[str, Any]:
    from stenographer.app import open_app
    from stenographer.settings import Settings

    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp), turn_limit=1_000)  # the most: no compression
        if prefetch is not None:
            settings = settings.replace(graphrag_prefetch=prefetch)
        app = open_app(settings)
        try:
            load_s = load_corpus(app, n)
            rss_before = _rss_mb()
            report = {"turns": n, "load_s": round(load_s, 1), "rss_before_mb": round(rss_before),
                      "prefetch": app.settings.graphrag_prefetch}
            report["extract"] = extract(app, batch_size)
            # The worker that extracts the next batch is a second process: its peak
            # counts too (the sum is an upper bound of the two at once).
            report["worker_peak_rss_mb"] = round(_rss_mb(resource.RUSAGE_CHILDREN))
            report["peak_rss_mb"] = round(_rss_mb()) + report["worker_peak_rss_mb"]
            report["stats"] = {k: v for k, v in app.run("graphrag_stats", {})[0]["stats"].items()
                               if k in ("entities", "edges", "entity_turns", "edge_turns",
                                        "communities")}
            report["query"] = queries(app, query_count)
            report["db_mb"] = round((Path(tmp) / "steno.db").stat().st_size / 2**20, 1)
        finally:
            app.close()
    return report


# --------------------------------------------------------------------------- LoCoMo


def _rrf(*lists: tuple[list[int], float]) -> list[int]:
    score: dict[int, float] = {}
    for ranked, weight in lists:
        for rank, item in enumerate(ranked):
            score[item] = score.get(item, 0.0) + weight / (RRF_K + rank + 1)
    return sorted(score, key=lambda i: (-score[i], i))


def run_locomo(path: Path, weights: list[float]) -> dict[str, Any]:
    from bench.locomo import CATEGORY_NAMES, load_conversations, question_scores
    from stenographer.app import open_app
    from stenographer.settings import Settings

    conversations = load_conversations(path)
    with tempfile.TemporaryDirectory() as tmp:
        app = open_app(Settings(data_dir=Path(tmp), turn_limit=8))
        try:
            ids: dict[tuple[str, str], int] = {}
            for conv in conversations:
                for turn in conv.turns:
                    out, _ = app.run("ingest", {"role": turn.role, "content": turn.content,
                                                "session_id": conv.sample_id,
                                                "created_at": turn.created_at})
                    ids[(conv.sample_id, turn.dialog_id)] = out["reply"]["exchange_id"]
            extract(app, 1_000)
            rows: list[tuple[int, list[int], list[int], list[int]]] = []
            for conv in conversations:
                for q in conv.questions:
                    evidence = [ids[(conv.sample_id, d)] for d in q.evidence
                                if (conv.sample_id, d) in ids]
                    if q.category not in CATEGORY_NAMES or not evidence:
                        continue
                    out, _ = app.run("search", {"query": q.text, "session_id": conv.sample_id,
                                                "limit": 50, "mode": "hybrid"})
                    searched = [h["exchange_id"] for h in out["hits"]]
                    graph, _ = app.run("graph_query", {"query": q.text, "hops": 2,
                                                       "session_id": conv.sample_id,
                                                       "limit": 20})
                    graphed = [t["exchange_id"] for t in graph["graph_result"]["turns"]]
                    rows.append((q.category, evidence, searched, graphed))
        finally:
            app.close()

    def recall(variant: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for label, keep in (("overall", lambda c: True), ("1 multi-hop", lambda c: c == 1)):
            scores = [question_scores(variant(s, g), e, ks=(5, 10))
                      for c, e, s, g in rows if keep(c)]
            out[label] = {"questions": len(scores),
                          "recall@5": round(sum(x["recall@5"] for x in scores) / len(scores), 3),
                          "recall@10": round(sum(x["recall@10"] for x in scores)
                                             / len(scores), 3)}
        return out

    report: dict[str, Any] = {"search": recall(lambda s, g: s),
                              "graph_only": recall(lambda s, g: g)}
    for w in weights:
        report[f"fused_rrf_w{w}"] = recall(lambda s, g, w=w: _rrf((s, 1.0), (g, w)))
    # The graph only reorders the search's own candidates (a bonus for turns it supports).
    report["boost_within_search"] = recall(
        lambda s, g: sorted(s, key=lambda t: (-(1 / (RRF_K + s.index(t) + 1)
                                                + (0.5 / RRF_K if t in g else 0.0)), t)))
    # The last two of the top 10 are the graph's best turns that search did not rank.
    report["graph_fills_last_2"] = recall(
        lambda s, g: s[:8] + [t for t in g if t not in s[:8]][:2] + s[8:])
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=100_000)
    parser.add_argument("--batch-size", type=int, help="default: STENO_GRAPHRAG_BATCH")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--prefetch", type=int,
                        help="default: STENO_GRAPHRAG_PREFETCH's default (0: one process)")
    parser.add_argument("--locomo", action="store_true")
    parser.add_argument("--data", type=Path,
                        default=REPO_ROOT.parent / "shared" / "data" / "locomo"
                        / "locomo-dev.json")
    parser.add_argument("--graph-weight", type=float, action="append")
    parser.add_argument("--json", type=Path, help="also write the report here")
    args = parser.parse_args(argv)
    if args.locomo:
        report = run_locomo(args.data, args.graph_weight or [0.25, 0.5, 1.0])
    else:
        report = run_corpus(args.turns, args.batch_size, args.queries, args.prefetch)
        report["targets"] = TARGETS
        report["met"] = {
            "extract_tps": (report["extract"]["turns_per_s"] or 0) >= TARGETS["extract_tps"],
            "peak_rss_mb": report["peak_rss_mb"] <= TARGETS["peak_rss_mb"]}
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
