"""What a SQLite store's bytes are spent on: per table and index of the file, per kind of
file of the derived keyword index, each per 1,000 turns.

Run from the repository root::

    python bench/storage.py --turns 20000 [--keep DIR] [--session-turns 200] [--batch 2000]
    python bench/storage.py --store DIR      # measure a store directory built before

The store is built as bench/scale.py builds it (its generated turns, ``ingest_batch``
``--batch`` turns at a time, the queue moved into the derived index), then closed and
measured: the file after a checkpoint, split by ``dbstat`` into each btree's payload,
its cells' overhead and its unused bytes (an FTS5 or vec0 table is several shadow
tables, each listed), the free pages, and the keyword index directory by file kind
(Tantivy's ``.idx`` postings, ``.pos`` positions, ``.term`` dictionary, ``.store``
stored fields, ``.fast`` fast fields, ``.fieldnorm``...). ``--json`` writes it all.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import fmt_bytes, print_table
from scale import generated, ingest_request


def build(data_dir: Path, turns: int, batch: int, session_turns: int) -> dict[str, float]:
    """A store of ``turns`` generated turns through the bulk path; the build's figures."""
    from stenographer.app import open_app
    from stenographer.settings import Settings
    from store.db import Store
    from store.keyword_index import KeywordIndex

    app = open_app(Settings(data_dir=data_dir))
    source = generated(turns, session_turns)
    started = time.perf_counter()
    try:
        loaded = 0
        while loaded < turns:
            chunk = [next(source) for _ in range(min(batch, turns - loaded))]
            out, _ = app.run("ingest_batch", {"turns": [ingest_request(t) for t in chunk]})
            assert out["reply"]["stored"] == len(chunk), out["reply"]["text"]
            loaded += len(chunk)
        ingest_s = time.perf_counter() - started
        flushed = time.perf_counter()
        if isinstance(app.store, Store) and turns >= KeywordIndex.answers_from:
            app.store.keywords.flush(app.store)  # at rest; a smaller store keeps no index
        flush_s = time.perf_counter() - flushed
    finally:
        app.close()
    return {"ingest_s": ingest_s, "ingest_turns_per_s": turns / ingest_s, "flush_s": flush_s}


def rebuild(data_dir: Path) -> dict[str, float]:
    """The derived index written again from the turns (``stenographer index rebuild``)."""
    from stenographer.app import open_app
    from stenographer.settings import Settings

    app = open_app(Settings(data_dir=data_dir))
    try:
        started = time.perf_counter()
        out, _ = app.run("keyword_index_rebuild", {})
        seconds = time.perf_counter() - started
    finally:
        app.close()
    return {"rebuild_s": seconds, "reply": str(out.get("reply", ""))[:200]}


def measure(data_dir: Path) -> dict[str, Any]:
    import apsw

    db = data_dir / "steno.db"
    conn = apsw.Connection(str(db))
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
        free = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
        turns = int(conn.execute("SELECT count(*) FROM exchanges").fetchone()[0])
        objects = {str(name): {"bytes": int(size), "payload": int(payload),
                               "unused": int(unused), "cells": int(cells)}
                   for name, size, payload, unused, cells in conn.execute(
                       "SELECT name, sum(pgsize), sum(payload), sum(unused), sum(ncell) "
                       "FROM dbstat GROUP BY name ORDER BY 2 DESC")}
        content = conn.execute("SELECT sum(length(CAST(content AS BLOB))), "
                               "sum(length(content)) FROM exchanges").fetchone()
    finally:
        conn.close()
    keywords: dict[str, int] = defaultdict(int)
    directory = data_dir / "steno.db.keywords"
    for f in directory.rglob("*") if directory.exists() else []:
        if f.is_file():
            kind = f.suffix or f.name
            keywords[kind] += f.stat().st_size
    file_bytes = db.stat().st_size
    return {"turns": turns, "page_size": page_size, "file_bytes": file_bytes,
            "freelist_bytes": free * page_size, "objects": objects,
            "content_utf8_bytes": int(content[0] or 0), "content_chars": int(content[1] or 0),
            "keyword_files": dict(sorted(keywords.items(), key=lambda kv: -kv[1])),
            "keyword_bytes": sum(keywords.values())}


def report(m: dict[str, Any]) -> None:
    per = 1000 / max(m["turns"], 1)

    def kb(n: float) -> str:
        return f"{n * per / 1000:.1f}"

    rows = [[name, kb(o["bytes"]), kb(o["payload"]), kb(o["unused"]), o["cells"]]
            for name, o in m["objects"].items()]
    rows.append(["(free pages)", kb(m["freelist_bytes"]), "", "", ""])
    print_table(["btree", "KB/1k turns", "payload", "unused", "cells"], rows,
                title=f"\nThe file: {m['turns']:,} turns, {fmt_bytes(m['file_bytes'])} "
                      f"({m['file_bytes'] * per / 1e6:.3f} MB per 1,000 turns); the turns' "
                      f"text {kb(m['content_utf8_bytes'])} KB/1k as UTF-8")
    print_table(["file kind", "KB/1k turns"],
                [[k, kb(v)] for k, v in m["keyword_files"].items()],
                title=f"\nThe derived keyword index: {fmt_bytes(m['keyword_bytes'])} "
                      f"({m['keyword_bytes'] * per / 1e6:.3f} MB per 1,000 turns)")
    total = m["file_bytes"] + m["keyword_bytes"]
    print(f"\ntotal {fmt_bytes(total)}: {total * per / 1e6:.3f} MB per 1,000 turns")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=2_000)
    ap.add_argument("--session-turns", type=int, default=200)
    ap.add_argument("--store", type=Path, help="measure this store directory, build none")
    ap.add_argument("--keep", type=Path, help="build the store in this directory and keep it")
    ap.add_argument("--rebuild", action="store_true",
                    help="also time the derived index's rebuild, then measure again")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    out: dict[str, Any] = {}
    if args.store is not None:
        data_dir = args.store
    else:
        data_dir = args.keep or Path(tempfile.mkdtemp(prefix="steno-storage-"))
        data_dir.mkdir(parents=True, exist_ok=True)
        out["build"] = build(data_dir, args.turns, args.batch, args.session_turns)
        print(json.dumps(out["build"]))
    try:
        if args.rebuild:
            out["rebuild"] = rebuild(data_dir)
            print(json.dumps(out["rebuild"]))
        out["store"] = measure(data_dir)
        report(out["store"])
    finally:
        if args.store is None and args.keep is None:
            shutil.rmtree(data_dir, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
