"""Stores of 20,000 / 100,000 / 1,000,000 turns built through the bulk path, and what
they cost to search and to keep, on both backends.

Run from the repository root::

    python bench/scale.py [--sizes 20000,100000,1000000] [--backends sqlite,postgresql]
        [--batch 2000] [--session-turns 200] [--queries 200] [--json FILE] [--keep DIR]
        [--server-repo CHECKOUT]

Each backend's store grows through the sizes in turn (the smaller store is a prefix of
the larger): generated turns of ~300 characters (bench/ingest_query.make_turns: a small
technical vocabulary, decisions and blockers, user/assistant/tool roles) in sessions of
``--session-turns``, handed to the ``ingest_batch`` graph ``--batch`` at a time — the
bulk path that capture and import take: validation, redaction, signals, flags, vector,
keyword fields, one transaction a batch, compression after it (STENO_TURN_LIMIT at its
default). At each size one real stdio server (``python -m stenographer``, the MCP SDK
client) answers ``query_history`` requests (bench/ingest_query.build_queries:
questions, keywords, FTS syntax) scoped to a session and store-wide, each call followed
by a call rejected by argument validation: the floor that every latency is also given
as a ratio to. Figures: build time and rate (with the CPU per turn of this process
and of the worker process that computes most of a batch's per-turn stages), storage
per 1,000 turns (SQLite: the file after a checkpoint and the derived keyword index's
directory; PostgreSQL: every table with its indexes and TOAST data) and its largest
parts, session search p50/p99, store-wide search p50/p95, the server's peak resident memory
(and at the end, its own pages apart from the files it maps, and on SQLite the store's
and the derived keyword index's mapped pages among those), and the machine's load
while it ran; a fresh server's first store-wide search, sent at once after
the handshake and ``FIRST_PAUSE_S`` after it (once idle, a server loads what a first
search needs: ``stenographer.server.AppLoader``), and how long the index upkeep that the
first search starts on a store just built kept the server busy (the searches are timed
after it, as bench/ingest_query.py's are); on SQLite also the store-wide vector
kNN's overlap@k with a scan of every stored vector (``store.vectors``), for the same
query texts. The single ingest and its floor ratio are bench/ingest_query.py's.

SQLite is a file in a temporary directory, or with ``--keep DIR`` in ``DIR/sqlite``,
kept after the run with a manifest of what it holds (``scale.json``): a later run with
the same ``--keep`` reuses it instead of building it again, growing it when a size asks
for more turns (so a million turns are built once while the search is iterated on; the
build figures are then those of the run that built it). PostgreSQL 18 with pgvector is started on
127.0.0.1 by ``tests/pg_server.PostgresServer`` (``fsync=off``, as in the tests), or
``--pg-url`` names a running server; with ``--keep`` (which needs ``--pg-url``) the
PostgreSQL store is kept in that server's database ``steno_scale_kept``, its manifest
and derived keyword index in ``DIR/postgresql``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from backends import Backends, Load, request
from common import (
    REPO_ROOT,
    CallTimer,
    fmt_bytes,
    percentile,
    print_table,
    spawn_server,
    structured,
    wait_idle,
    worker_cpu_s,
)
from ingest_query import BRIEF, QUERY, Turn, build_queries, ingest_request, make_turns

CHUNK = 20_000  # turns generated at a time (a million are never held at once)
QUERY_TURNS = 20_000  # the newest turns the queries are drawn from


def generated(total: int, session_turns: int, first: int = 0) -> Iterator[Turn]:
    """Turns ``first`` to ``total`` (exclusive) of one stream, ``CHUNK`` generated at a
    time with a seed each, numbered and dated as one stream (a turn every 20 s) in
    sessions of ``session_turns``. A chunk's turns are a prefix of a longer chunk's
    (``make_turns`` draws them in order), so a stream resumed at ``first`` goes on with
    the same turns as one never stopped."""
    base = datetime(2026, 1, 5, 9, 0, 0, tzinfo=UTC).timestamp()
    for start in range(first - first % CHUNK, total, CHUNK):
        for t in make_turns(min(CHUNK, total - start), session_turns=session_turns,
                            seed=7 + start // CHUNK):
            n = start + t.index
            if n < first:
                continue
            when = datetime.fromtimestamp(base + 20 * n + int(t.created_at[-3:-1]) % 10, UTC)
            yield dataclasses.replace(t, index=n, session=f"bench-{n // session_turns:05d}",
                                      created_at=when.strftime("%Y-%m-%dT%H:%M:%SZ"))


MANIFEST = "scale.json"  # in a kept store's data directory
KEPT_DATABASE = "steno_scale_kept"  # a kept PostgreSQL store's database (--pg-url's server)


def kept_database(backends: Backends) -> str:
    """The URL of the database a kept PostgreSQL store lives in, on the server of
    ``--pg-url`` (created when missing); its data directory holds the manifest and the
    derived keyword index."""
    import psycopg

    if backends.pg is not None:
        raise SystemExit("--keep with postgresql needs --pg-url (a server that outlives "
                         "the run)")
    assert backends.pg_url is not None
    with psycopg.connect(backends.pg_url, autocommit=True) as conn:
        if conn.execute(b"SELECT 1 FROM pg_database WHERE datname = %s",
                        (KEPT_DATABASE,)).fetchone() is None:
            conn.execute(f'CREATE DATABASE "{KEPT_DATABASE}"'.encode())
    return f"{backends.pg_url.rsplit('/', 1)[0]}/{KEPT_DATABASE}"


def empty(url: str) -> bool:
    """Whether the database at ``url`` holds no store yet."""
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute(b"SELECT to_regclass('exchanges') IS NULL").fetchone() == (True,)


class Built:
    """One backend's store, grown a batch at a time through ``ingest_batch``; kept in
    ``args.keep`` (SQLite) and reused from there when a manifest says what it holds."""

    def __init__(self, backends: Backends, backend: str, total: int, args: argparse.Namespace
                 ) -> None:
        from stenographer.app import open_app
        from stenographer.settings import Settings

        self.backends, self.backend, self.batch = backends, backend, args.batch
        self.session_turns = args.session_turns
        self.loaded, self.build_s, self.build_cpu_s = 0, 0.0, 0.0
        self.build_worker_cpu_s = 0.0  # the per-turn stages' worker process (nodes.turn_worker)
        self.recent: list[Turn] = []  # the newest QUERY_TURNS turns
        self.ids: dict[int, int] = {}  # their exchange ids
        self.build_machine: dict[str, float] = {}  # the load while it was built
        self.kept = args.keep is not None
        if self.kept:
            self.data_dir, self.url = Path(args.keep) / backend, None
            self.data_dir.mkdir(parents=True, exist_ok=True)
            if backend == "postgresql":
                self.url = kept_database(backends)
            self._resume()
        else:
            self.data_dir, self.url = backends.fresh(backend, "scale")
        self.settings = Settings(data_dir=self.data_dir, database_url=self.url)
        self.app = open_app(self.settings)
        self.source = generated(total, args.session_turns, self.loaded)

    def _resume(self) -> None:
        """Take up a kept store where its manifest says it stopped."""
        path = self.data_dir / MANIFEST
        if not path.exists():
            if (self.data_dir / "steno.db").exists() or (self.url and not empty(self.url)):
                raise SystemExit(f"{self.data_dir} holds a store without {MANIFEST} (a build "
                                 "that did not finish?): remove it or keep elsewhere")
            return
        kept = json.loads(path.read_text())
        if kept["session_turns"] != self.session_turns:
            raise SystemExit(f"the store kept in {self.data_dir} has sessions of "
                             f"{kept['session_turns']} turns, not {self.session_turns}")
        self.loaded, self.build_s, self.build_cpu_s = (kept["loaded"], kept["build_s"],
                                                       kept["build_cpu_s"])
        self.build_machine = kept["build_machine"]
        self.build_worker_cpu_s = kept.get("build_worker_cpu_s", 0.0)
        self.recent = list(generated(self.loaded, self.session_turns,
                                     max(0, self.loaded - QUERY_TURNS)))
        self.ids = {t.index: i for t, i in zip(self.recent, kept["recent_ids"], strict=True)}
        print(f"  {self.backend}: reusing {self.loaded:,} turns kept in {self.data_dir}",
              flush=True)

    def _save(self) -> None:
        (self.data_dir / MANIFEST).write_text(json.dumps({
            "loaded": self.loaded, "build_s": self.build_s, "build_cpu_s": self.build_cpu_s,
            "build_worker_cpu_s": self.build_worker_cpu_s,
            "session_turns": self.session_turns, "build_machine": self.build_machine,
            "recent_ids": [self.ids[t.index] for t in self.recent]}))

    def grow_to(self, size: int) -> None:
        if self.loaded > size:
            raise SystemExit(f"the store kept in {self.data_dir} holds {self.loaded:,} turns, "
                             f"more than {size:,}: keep each size's store elsewhere")
        if self.loaded == size:
            return
        if self.kept:
            (self.data_dir / MANIFEST).unlink(missing_ok=True)  # until the build finishes
        started, cpu, load = time.perf_counter(), time.process_time(), Load()
        worker_cpu = worker_cpu_s(self.app)
        while self.loaded < size:
            batch = [next(self.source) for _ in range(min(self.batch, size - self.loaded))]
            out, _ = self.app.run("ingest_batch", {"turns": [ingest_request(t) for t in batch]})
            reply = out["reply"]
            assert reply["stored"] == len(batch) and not reply["rejected"], reply["text"]
            self.recent = (self.recent + batch)[-QUERY_TURNS:]
            self.ids.update((t.index, i) for t, i in zip(batch, reply["exchange_ids"],
                                                          strict=True))
            self.loaded += len(batch)
            if self.loaded % 100_000 < self.batch:
                rate = self.loaded / (self.build_s + time.perf_counter() - started)
                print(f"  {self.backend}: {self.loaded:,} turns ({rate:,.0f}/s)", flush=True)
        self.ids = {t.index: self.ids[t.index] for t in self.recent}
        self.build_s += time.perf_counter() - started
        self.build_cpu_s += time.process_time() - cpu
        self.build_worker_cpu_s += worker_cpu_s(self.app) - worker_cpu
        self.build_machine = load.stop()
        if self.kept:
            self._save()

    def storage(self) -> dict[str, Any]:
        """Bytes the store occupies, every index included (SQLite: the file and the
        derived keyword index's directory beside it, at rest: the queue of turns not yet
        in that index moved into it, as a server does)."""
        if self.url is None:  # the file with the store closed (WAL checkpointed)
            from stenographer.app import open_app
            from store.db import Store
            from store.keyword_index import KeywordIndex

            if isinstance(self.app.store, Store) and self.loaded >= KeywordIndex.answers_from:
                self.app.store.keywords.flush(self.app.store)  # a smaller store keeps none
            self.app.close()
            try:
                out = self.backends.size(self.backend, self.data_dir, None)
                keywords = self.data_dir / "steno.db.keywords"
                out["file_bytes"] = out["bytes"]
                out["largest"]["keyword index directory"] = out["keyword_dir_bytes"] = sum(
                    f.stat().st_size for f in keywords.rglob("*") if f.is_file())
                out["bytes"] += out["keyword_dir_bytes"]
                return out
            finally:
                self.app = open_app(self.settings)
        import psycopg

        with psycopg.connect(self.url) as conn:
            rows = conn.execute(b"""
                SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c
                JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = current_schema() AND c.relkind = 'r'
                ORDER BY 2 DESC""").fetchall()
        return {"bytes": sum(int(b) for _, b in rows),
                "largest": {str(n): int(b) for n, b in rows[:6]}}

    def planner_rows(self) -> dict[str, Any] | None:
        """PostgreSQL: how many turns the planner's statistics of ``exchanges`` were
        taken of, and by whom (the bulk write's ANALYZE or autovacuum's); they decide the
        searches' plans. None on SQLite."""
        if self.url is None:
            return None
        import psycopg

        with psycopg.connect(self.url) as conn:
            row = conn.execute(b"""
                SELECT c.reltuples, s.last_analyze, s.last_autoanalyze
                FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid
                WHERE c.oid = 'exchanges'::regclass""").fetchone()
        assert row is not None
        seen, manual, auto = row
        by = None if manual is None and auto is None else (
            "autovacuum" if manual is None or (auto is not None and auto > manual)
            else "a bulk write")
        return {"turns": max(int(seen), 0), "by": by}

    def close(self) -> None:
        self.app.close()
        if not self.kept:
            shutil.rmtree(self.data_dir, ignore_errors=True)


def memory_of(pid: int | None, data_dir: Path | None = None) -> dict[str, int]:
    """The process's peak resident memory (``peak``, Linux's VmHWM) and, now, its
    resident memory split into anonymous pages (``anon``: the heap, the vector copy,
    the derived index's caches) and file pages (``file``: the libraries, and on SQLite
    the pages of the store and of its derived keyword index that the process maps, page
    cache the kernel can take back), in bytes; with ``data_dir``, the file pages of the
    files under it (``store``: ``steno.db``; ``index``: the derived keyword index's
    directory) apart, from ``/proc/<pid>/smaps``. {} where /proc does not say."""
    fields = {"VmHWM": "peak", "RssAnon": "anon", "RssFile": "file"}
    out: dict[str, int] = {}
    if pid is None:
        return out
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key = fields.get(line.split(":", 1)[0])
            if key is not None:
                out[key] = int(line.split()[1]) * 1024
        if data_dir is not None:
            out.update(_mapped_under(Path(f"/proc/{pid}/smaps").read_text(), data_dir))
    except OSError:
        return {}
    return out


def _mapped_under(smaps: str, data_dir: Path) -> dict[str, int]:
    """Resident bytes of the mappings of the store's file and of its derived keyword
    index's files, from the text of ``/proc/<pid>/smaps``."""
    data_dir = data_dir.resolve()
    store, index = str(data_dir / "steno.db"), str(data_dir / "steno.db.keywords") + "/"
    out = {"store": 0, "index": 0}
    kind: str | None = None
    for line in smaps.splitlines():
        head, _, rest = line.partition(" ")
        if not head.endswith(":"):  # a mapping's first line: range, mode, offset, device,
            parts = rest.split(maxsplit=4)  # inode, then its file's path if it has one
            path = parts[4] if len(parts) == 5 else ""
            kind = ("index" if path.startswith(index) else "store" if path == store
                    else None)
        elif head == "Rss:" and kind is not None:
            out[kind] += int(rest.split()[0]) * 1024
    return out


FIRST_PAUSE_S = 2.0  # an agent's first search comes after its user's first prompt
WARM_UP_QUERY = {"query": "warm up", "cross_session": True}


async def first_search(built: Built, repo: Path, env: dict[str, str], pause_s: float
                       ) -> float:
    """ms of a fresh server's first (store-wide) search, sent ``pause_s`` after its
    handshake."""
    async with spawn_server(built.data_dir, stderr_name="scale-stderr.log",
                            extra_env=env, repo=repo) as server:
        await anyio.sleep(pause_s)
        timer = CallTimer(QUERY)
        await timer.call(server, QUERY, WARM_UP_QUERY)
        return timer.latencies_ms[0]


async def searched(built: Built, count: int, repo: Path = REPO_ROOT) -> dict[str, Any]:
    """query_history over one stdio server, each call followed by a rejected one; first
    the first search of a fresh server after a pause (the one below comes at once)."""
    scoped = [a for _, a, _ in build_queries(built.recent, built.ids, count, seed=11)]
    queries = {"session": scoped,
               "store": [{**a, "session_id": None, "cross_session": True} for a in scoped]}
    env = {"STENO_DATABASE_URL": built.url} if built.url else {}
    out: dict[str, Any] = {"first_call_paused_ms": await first_search(built, repo, env,
                                                                      FIRST_PAUSE_S)}
    async with spawn_server(built.data_dir, stderr_name="scale-stderr.log",
                            extra_env=env, repo=repo) as server:
        warm = CallTimer(QUERY)
        await warm.call(server, QUERY, WARM_UP_QUERY)
        out["first_call_ms"] = warm.latencies_ms[0]
        # A store just written by the bulk path has its index upkeep started by the first
        # search (FTS5's segments merged, the derived index's queue taken in): searches
        # timed during it measure that work too (a session p50 of 4.4-4.7 ms instead of
        # 3.0 at 1,000,000 turns). Timed once it is done, as bench/ingest_query.py does;
        # how long it took is a figure of its own.
        out["settle_s"] = await anyio.to_thread.run_sync(wait_idle, server.pid)
        floor = CallTimer("floor")
        for scope, batch in queries.items():
            timer, hits = CallTimer(QUERY), 0
            for q in batch:
                args = {k: v for k, v in request(q).items() if v is not None}
                result = await timer.call(server, QUERY, args)
                hits += bool(result is not None and structured(result).get("hits"))
                await floor.call(server, BRIEF, {"session_id": ""})
            out[scope] = {"ms": timer.latencies_ms, "errors": len(timer.errors),
                          "error_samples": timer.errors[:2], "with_hits": hits}
        assert len(floor.errors) == len(floor.latencies_ms), "the floor call was not rejected"
        out["floor_ms"] = percentile(floor.latencies_ms, 50)
        memory = memory_of(server.pid, None if built.url else built.data_dir)
        out["server_peak_rss"] = memory.get("peak")
        out["server_memory_end"] = memory
    for scope in ("session", "store"):
        ms = out[scope].pop("ms")
        out[scope].update({q: percentile(ms, v) for q, v in
                           (("p50", 50), ("p95", 95), ("p99", 99))}, calls=len(ms))
    return out


def vector_overlap(built: Built, count: int) -> dict[str, Any] | None:
    """How much of the exact top k of a scan of every stored vector the two-pass kNN
    returns, store-wide, for the benchmark's query texts (k = the search's candidate
    count): overlap@k, ties at the k-th score counted as found. SQLite only (PostgreSQL
    answers with pgvector)."""
    import numpy as np

    from nodes.extract.vectors import text_vector
    from nodes.load_evidence.hits import CANDIDATES
    from store.db import Store

    store = built.app.store
    if not isinstance(store, Store):
        return None
    cache, k = store.vectors, CANDIDATES
    texts = [a["query"] for _, a, _ in build_queries(built.recent, built.ids, count, seed=11)]
    overlaps, seconds = [], []
    for text in texts:
        query = text_vector(text, built.settings.vector_dim)
        if not query.any():
            continue
        started = time.perf_counter()
        with store.read() as conn:
            got = cache.knn(conn, query, k)
        seconds.append(time.perf_counter() - started)
        every = cache.exact_scores(query, np.arange(cache._n))
        every = np.sort(every[every > 0])[::-1][:k]
        if not len(every):
            continue
        overlaps.append(sum(s >= every[-1] for _, s in got[: len(every)]) / len(every))
    return {"k": k, "queries": len(overlaps), "mean": float(np.mean(overlaps)),
            "min": float(np.min(overlaps)),
            "knn_in_process_p50_ms": percentile([x * 1e3 for x in seconds], 50)}


def run_backend(backends: Backends, backend: str, sizes: list[int],
                args: argparse.Namespace) -> list[dict[str, Any]]:
    built = Built(backends, backend, max(sizes), args)
    rows = []
    try:
        for size in sizes:
            built.grow_to(size)
            row: dict[str, Any] = {
                "backend": backend, "turns": built.loaded, "build_s": round(built.build_s, 1),
                "build_cpu_s": round(built.build_cpu_s, 1),
                "build_worker_cpu_s": round(built.build_worker_cpu_s, 1),
                "build_turns_per_s": round(built.loaded / built.build_s),
                "build_machine": built.build_machine, "store": built.storage()}
            load, planned = Load(), built.planner_rows()
            row["search"] = anyio.run(searched, built, args.queries, args.server_repo)
            row["search_machine"] = load.stop()
            if planned is not None:
                row["planner_rows"] = {"searches_began": planned,
                                       "searches_ended": built.planner_rows()}
            row["vector_overlap"] = vector_overlap(built, args.queries)
            rows.append(row)
            print(json.dumps(row)[:700], flush=True)
    finally:
        built.close()
    return rows


def ratio(value: float, floor: float) -> str:
    return f"{value:.1f} ({value / floor:.0f}x)"


def report(rows: list[dict[str, Any]]) -> None:
    print_table(
        ["backend", "turns", "build s", "turns/s", "per 1,000 turns", "session p50 (x floor)",
         "session p99", "store-wide p50", "store-wide p95", "server RSS", "floor ms",
         "load 1m"],
        [[r["backend"], f"{r['turns']:,}", r["build_s"], f"{r['build_turns_per_s']:,}",
          fmt_bytes(r["store"]["bytes"] * 1000 / r["turns"]),
          ratio(r["search"]["session"]["p50"], r["search"]["floor_ms"]),
          ratio(r["search"]["session"]["p99"], r["search"]["floor_ms"]),
          ratio(r["search"]["store"]["p50"], r["search"]["floor_ms"]),
          ratio(r["search"]["store"]["p95"], r["search"]["floor_ms"]),
          fmt_bytes(r["search"]["server_peak_rss"]), f"{r['search']['floor_ms']:.2f}",
          f"{r['build_machine']['loadavg_1m_end']:.1f}"]
         for r in rows],
        title="\nStores built through the bulk path (ingest_batch); query_history over "
              "stdio, ms (ratio to a call rejected by validation)")
    smallest = {}  # per backend, the row of its smallest store in this run
    for r in sorted(rows, key=lambda r: r["turns"]):
        smallest.setdefault(r["backend"], r)
    for r in rows:
        base = smallest[r["backend"]]
        if base is not r:  # a session search should not grow with the store (1.5x at most)
            grown, at = (x["search"]["session"]["p50"] for x in (r, base))
            floors = r["search"]["floor_ms"] / base["search"]["floor_ms"]
            print(f"\n{r['backend']} session search p50 at {r['turns']:,} turns: "
                  f"{grown / at:.2f}x the {base['turns']:,}-turn figure "
                  f"({grown / at / floors:.2f}x as ratios to each run's floor)")
    for r in rows:
        print(f"\n{r['backend']} build of {r['turns']:,} turns, CPU per turn: this process "
              f"{r['build_cpu_s'] / r['turns'] * 1e6:.0f} us, the per-turn stages' worker "
              f"process {r.get('build_worker_cpu_s', 0.0) / r['turns'] * 1e6:.0f} us (load "
              f"{r['build_machine']['loadavg_1m_start']:.1f} -> "
              f"{r['build_machine']['loadavg_1m_end']:.1f})")
        print(f"\n{r['backend']} at {r['turns']:,} turns: a fresh server's first store-wide "
              f"search, sent at once after the handshake "
              f"{r['search']['first_call_ms']:.0f} ms, {FIRST_PAUSE_S:.0f} s after it "
              f"{r['search']['first_call_paused_ms']:.0f} ms; the searches were timed "
              f"once the index upkeep that the first one started was done "
              f"({r['search'].get('settle_s', 0.0):.1f} s later, the last 1 s of it idle)")
        end = r["search"].get("server_memory_end") or {}
        if "anon" in end and "file" in end:
            print(f"\n{r['backend']} at {r['turns']:,} turns: the server's resident memory at "
                  f"the end of the searches {fmt_bytes(end['anon'] + end['file'])}: "
                  f"{fmt_bytes(end['anon'])} its own (anonymous), {fmt_bytes(end['file'])} "
                  f"file pages (mapped files: the libraries, and on SQLite the store's pages)"
                  + (f", of which the store's file {fmt_bytes(end['store'])} and its derived "
                     f"keyword index's {fmt_bytes(end['index'])}" if "store" in end else ""))
        if r.get("planner_rows"):
            began, ended = (r["planner_rows"][k] for k in ("searches_began", "searches_ended"))
            print(f"\n{r['backend']} at {r['turns']:,} turns: the planner's statistics of the "
                  f"turns were taken of {began['turns']:,} turns (by {began['by']}) when the "
                  f"searches began, of {ended['turns']:,} (by {ended['by']}) when they ended")
        if r.get("vector_overlap"):
            o = r["vector_overlap"]
            print(f"\n{r['backend']} at {r['turns']:,} turns: store-wide vector overlap@{o['k']} "
                  f"with a scan of every vector {o['mean']:.4f} (min {o['min']:.4f}, "
                  f"{o['queries']} queries), kNN in-process p50 "
                  f"{o['knn_in_process_p50_ms']:.1f} ms")
        per_1k = {name: size * 1000 / r["turns"] for name, size in r["store"]["largest"].items()}
        print(f"\nlargest parts of the {r['backend']} store at {r['turns']:,} turns, per 1,000 "
              "turns: " + ", ".join(f"{n} {fmt_bytes(b)}" for n, b in
                                    sorted(per_1k.items(), key=lambda kv: -kv[1])))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="20000,100000,1000000")
    ap.add_argument("--backends", default="sqlite,postgresql")
    ap.add_argument("--batch", type=int, default=2_000, help="turns per ingest_batch run")
    ap.add_argument("--session-turns", type=int, default=200)
    ap.add_argument("--queries", type=int, default=200, help="per scope and size")
    ap.add_argument("--pg-url", help="a running PostgreSQL server's admin URL")
    ap.add_argument("--json", help="also write every figure to this file")
    ap.add_argument("--server-repo", type=Path, default=REPO_ROOT,
                    help="serve the searches from this checkout (A/B on a kept store)")
    ap.add_argument("--keep", metavar="DIR",
                    help="keep each store in DIR/<backend> and reuse one kept there "
                         "(PostgreSQL: in the database steno_scale_kept of --pg-url's "
                         "server, the manifest and derived index in DIR/postgresql)")
    args = ap.parse_args()
    sizes = sorted(int(x) for x in args.sizes.split(","))
    names = args.backends.split(",")
    root = Path(tempfile.mkdtemp(prefix="steno-scale-"))
    backends = Backends(root, names, args.pg_url)
    out: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "loadavg_at_start": os.getloadavg()}, "args": vars(args), "rows": []}
    try:
        for backend in names:
            out["rows"] += run_backend(backends, backend, sizes, args)
    finally:
        backends.close()
        shutil.rmtree(root, ignore_errors=True)
    report(out["rows"])
    print("single ingest over stdio and its floor ratio: bench/ingest_query.py")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
