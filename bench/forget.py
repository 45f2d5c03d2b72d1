"""Forgetting on a store with a GraphRAG graph: the cost of taking back what the graph
derived from the forgotten turns' sessions, and of re-deriving them.

Run from the repository root::

    python bench/forget.py                       # 20,000 generated turns
    python bench/forget.py --turns 100000 --json report.json

The corpus of ``bench/graphrag.py`` (sessions of 200 turns) is written into a fresh
store and extracted; then, several times, one turn is forgotten by id (vacuum off, so
the figure is the forget transaction with the graph repair — its session re-derived
without it — not the file rewrite) and ``graphrag extract`` recomputes communities.
Figures: forget p50/max (graph run time in process), the next extract's time
(communities only), and whether the graph's export then equals a full rebuild (the
graph reset and extracted again from the remaining turns).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.common import percentile  # noqa: E402
from bench.graphrag import extract, load_corpus  # noqa: E402


def _export(app: Any) -> str:
    out, _ = app.run("graphrag_export", {"format": "json"})
    return str(out["reply"]["document"])


def run(n: int, forgets: int) -> dict[str, Any]:
    from stenographer.app import open_app
    from stenographer.settings import Settings

    with tempfile.TemporaryDirectory() as tmp:
        app = open_app(Settings(data_dir=Path(tmp), turn_limit=1_000_000))
        try:
            load_corpus(app, n)
            first = extract(app, 1_000)
            conn = app.store.connection()
            step = max(n // (forgets + 1), 1)
            ids = [int(r[0]) for r in conn.execute(
                "SELECT id FROM exchanges ORDER BY id")][step::step][:forgets]
            forget_ms, extract_s, repaired = [], [], []
            for ident in ids:
                t0 = time.perf_counter()
                out, _ = app.run("forget", {"exchange_ids": [ident], "confirm": True,
                                            "vacuum": False})
                forget_ms.append((time.perf_counter() - t0) * 1e3)
                repaired.append(out["reply"]["graph"])
                t0 = time.perf_counter()
                extract(app, 1_000)  # communities only: the graph is re-derived
                extract_s.append(time.perf_counter() - t0)
            kept = _export(app)
            app.run("graphrag_reset", {"confirm": True})
            extract(app, 1_000)
            equal = kept == _export(app)
        finally:
            app.close()
    return {"turns": n, "initial_extract_s": first["seconds"], "forgets": len(ids),
            "forget_p50_ms": round(percentile(forget_ms, 50), 1),
            "forget_max_ms": round(max(forget_ms), 1),
            "next_extract_p50_s": round(percentile(extract_s, 50), 2),
            "sessions_rederived": sum(r["sessions_rederived"] for r in repaired),
            "entities_removed": sum(r["entities_removed"] for r in repaired),
            "equal_to_full_rebuild": equal}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20_000)
    parser.add_argument("--forgets", type=int, default=10)
    parser.add_argument("--json", type=Path, help="also write the report here")
    args = parser.parse_args(argv)
    report = run(args.turns, args.forgets)
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    return 0 if report["equal_to_full_rebuild"] else 1


if __name__ == "__main__":
    sys.exit(main())
