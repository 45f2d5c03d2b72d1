"""The two backends side by side: ingest throughput with 1 and 8 writer processes, and
search latency at 100,000 and 1,000,000 turns.

Run from the repository root::

    python bench/backends.py [--backends sqlite,postgresql] [--writers 1,8]
        [--writer-turns 2000] [--sizes 100000,1000000] [--queries 200] [--json FILE]
    python bench/backends.py --quick     # a smoke test: small sizes, a few queries
    python bench/backends.py --no-search / --no-ingest   # one half only

SQLite is a file in a temporary directory; PostgreSQL 18 with pgvector is started on
127.0.0.1 by ``tests/pg_server.PostgresServer`` (``fsync=off``: durability off on that
side, as in the tests; SQLite runs with its default ``synchronous=normal``).

Ingest: W writer processes (``python -m stenographer`` over stdio, driven by the MCP SDK
client as in bench/ingest_query.py) each ingest ``--writer-turns`` turns of
``make_turns`` text into sessions of their own, ``--inflight`` calls in flight per
writer (one task per session), STENO_TURN_LIMIT at its default so compression runs as it
does in use. On SQLite every writer opens the same file; on PostgreSQL every writer has
a data directory of its own (as on separate hosts) and the same database. Figures:
turns/s over the wall time of the ingest (server start-up excluded), CPU seconds of the
writers and of the PostgreSQL server, and the machine's load while it ran.

Search: a corpus is loaded straight through the store's write path (``record_turn``,
the call the ingest graph's publish node makes, with the keyword index's context and
date columns and the hashed vector computed as ingest computes them) in transactions of
``--batch`` turns, up to each size in turn (100,000 is a prefix of 1,000,000); at each
size ``query_history`` requests (bench/ingest_query.build_queries: questions, keywords
and FTS syntax, session-scoped and store-wide) run through the search graph in this
process and through one real stdio server. Loading time and store size are reported
per size; ``--load-budget`` stops a backend's loading early and reports how far it got.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    REPO_ROOT,
    CallTimer,
    Server,
    child_pids,
    db_measure,
    fmt_bytes,
    print_table,
    process_cpu_s,
    spawn_server,
    structured,
    summarize,
)
from ingest_query import INGEST, Turn, build_queries, make_turns

sys.path.insert(0, str(REPO_ROOT))

QUERY = "stenographer_query_history"
SESSION_TURNS = 500  # ingest: four sessions per writer of 2,000 turns
CORPUS_SESSION_TURNS = 1_000  # search corpus: 1,000 sessions at 1,000,000 turns


# --------------------------------------------------------------------------- machine


def cpu_times() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    fields = [float(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


class Load:
    """How busy the machine was between ``start`` and ``stop`` (all processes)."""

    def __init__(self) -> None:
        self.busy, self.total = cpu_times()
        self.load_start = os.getloadavg()[0]

    def stop(self) -> dict[str, float]:
        busy, total = cpu_times()
        return {"machine_busy_fraction": round((busy - self.busy) / (total - self.total), 3),
                "loadavg_1m_start": self.load_start,
                "loadavg_1m_end": os.getloadavg()[0]}


# --------------------------------------------------------------------------- backends


class Backends:
    """Where each backend's stores live: temporary directories, one PostgreSQL server."""

    def __init__(self, root: Path, names: Sequence[str], pg_url: str | None = None) -> None:
        self.root = root
        self.names = list(names)
        self.pg: Any = None  # the server this run started
        self.pg_url = pg_url  # a server's URL (its postgres database)
        self.pg_data: Path | None = None
        if "postgresql" in names and pg_url is None:
            from tests.pg_server import PostgresServer

            self.pg = PostgresServer().start()
            self.pg_url = self.pg.url
        if self.pg_url is not None:
            import psycopg

            with psycopg.connect(self.pg_url) as conn:
                row = conn.execute(b"SHOW data_directory").fetchone()
            self.pg_data = Path(row[0]) if row else None

    def fresh(self, backend: str, label: str, template: str | None = None
              ) -> tuple[Path, str | None]:
        """A new empty store: (a data directory, the database URL or None);
        ``template``: on PostgreSQL, the URL of a database the new one is a copy of."""
        data_dir = Path(tempfile.mkdtemp(prefix=f"{label}-{backend}-", dir=self.root))
        if backend != "postgresql":
            return data_dir, None
        import psycopg

        assert self.pg_url is not None
        name = f"steno_{label}_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(self.pg_url, autocommit=True) as conn:
            copy = "" if template is None else f' TEMPLATE "{template.rsplit("/", 1)[1]}"'
            conn.execute(f'CREATE DATABASE "{name}"{copy}'.encode())
        return data_dir, f"{self.pg_url.rsplit('/', 1)[0]}/{name}"

    def pg_cpu_s(self) -> float | None:
        """CPU seconds of the PostgreSQL server: the postmaster, its reaped children and
        the live ones (connection backends, background workers)."""
        if self.pg_data is None:
            return None
        try:
            pid = int((self.pg_data / "postmaster.pid").read_text().split()[0])
            stat = Path(f"/proc/{pid}/stat").read_text()
        except (OSError, ValueError):
            return None
        fields = stat[stat.rfind(")") + 2:].split()
        reaped = (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")
        own = process_cpu_s(pid) or 0.0
        return own + reaped + sum(process_cpu_s(c) or 0.0 for c in child_pids(pid))

    def size(self, backend: str, data_dir: Path, url: str | None) -> dict[str, Any]:
        if url is None:
            measured = db_measure(data_dir)
            objects = measured.get("objects_bytes", {})
            return {"bytes": measured["main_file_bytes"],
                    "largest": dict(list(objects.items())[:6])}
        import psycopg

        with psycopg.connect(url) as conn:
            total = conn.execute(b"SELECT pg_database_size(current_database())").fetchone()
            rows = conn.execute(b"""
                SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c
                JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = 'public' AND c.relkind = 'r'
                ORDER BY 2 DESC LIMIT 6""").fetchall()
        assert total is not None
        return {"bytes": int(total[0]), "largest": {str(n): int(s) for n, s in rows}}

    def close(self) -> None:
        if self.pg is not None:
            self.pg.stop()


# --------------------------------------------------------------------------- ingest


async def _writer(server: Server, turns: list[Turn], inflight: int, timer: CallTimer
                  ) -> None:
    by_session: dict[str, list[Turn]] = {}
    for turn in turns:
        by_session.setdefault(turn.session, []).append(turn)
    sem = anyio.Semaphore(inflight)

    async def session(session_turns: list[Turn]) -> None:
        for turn in session_turns:  # in order within a session
            async with sem:
                await timer.call(server, INGEST, {
                    "role": turn.role, "content": turn.content, "session_id": turn.session,
                    "created_at": turn.created_at})

    async with anyio.create_task_group() as tg:
        for session_turns in by_session.values():
            tg.start_soon(session, session_turns)


async def ingest_run(backends: Backends, backend: str, writers: int, writer_turns: int,
                     inflight: int) -> dict[str, Any]:
    """``writers`` processes ingest ``writer_turns`` turns each into one fresh store."""
    data_dir, url = backends.fresh(backend, f"ingest{writers}")
    env = {"STENO_DATABASE_URL": url} if url else {}
    turns = make_turns(writers * writer_turns, session_turns=SESSION_TURNS)
    timers = [CallTimer(INGEST) for _ in range(writers)]
    async with contextlib.AsyncExitStack() as stack:
        servers = []
        for w in range(writers):  # SQLite: one file; PostgreSQL: a directory per "host"
            where = data_dir if url is None else data_dir / f"host-{w}"
            servers.append(await stack.enter_async_context(spawn_server(
                where, stderr_name=f"writer-{w}-stderr.log", extra_env=env)))
        cpu_writers = [s.cpu_s() or 0.0 for s in servers]
        cpu_pg, cpu_self, load = backends.pg_cpu_s(), time.process_time(), Load()
        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for w, server in enumerate(servers):
                part = turns[w * writer_turns:(w + 1) * writer_turns]
                tg.start_soon(_writer, server, part, inflight, timers[w])
        wall = time.perf_counter() - started
        machine = load.stop()
        cpu_writers = [(s.cpu_s() or 0.0) - c for s, c in zip(servers, cpu_writers,
                                                               strict=True)]
        cpu_self = time.process_time() - cpu_self
        end_pg = backends.pg_cpu_s()
        cpu_pg = end_pg - cpu_pg if end_pg is not None and cpu_pg is not None else None
    latencies = [x for t in timers for x in t.latencies_ms]
    errors = [e for t in timers for e in t.errors]
    n = writers * writer_turns
    stored = stored_turns(data_dir, url)
    size = backends.size(backend, data_dir, url)
    shutil.rmtree(data_dir, ignore_errors=True)
    return {
        "backend": backend, "writers": writers, "turns": n, "inflight_per_writer": inflight,
        "wall_s": round(wall, 2), "turns_per_s": round(n / wall, 1),
        "latency_ms": summarize(latencies), "errors": len(errors),
        "error_samples": errors[:3], "stored": stored,
        "cpu_s": {"writers": round(sum(cpu_writers), 2),
                  "postgres": None if cpu_pg is None else round(cpu_pg, 2),
                  "bench_client": round(cpu_self, 2)},
        "cpu_ms_per_turn": round(1e3 * (sum(cpu_writers) + (cpu_pg or 0.0)) / n, 2),
        "store_bytes": size["bytes"], "machine": machine,
    }


def stored_turns(data_dir: Path, url: str | None) -> int:
    if url is None:
        import apsw

        conn = apsw.Connection(str(data_dir / "steno.db"), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            return int(conn.execute("SELECT count(*) FROM exchanges").fetchone()[0])
        finally:
            conn.close()
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute(b"SELECT count(*) FROM exchanges").fetchone()
    assert row is not None
    return int(row[0])


# --------------------------------------------------------------------------- corpus


def new_turns(turns: Sequence[Turn], dim: int) -> Iterator[Any]:
    """What the ingest graph hands ``record_turn`` for each turn: the content hash, the
    hashed vector and the keyword index's context and date, from the turns before it
    in its session (nearest first, cut as ``previous_contents`` cuts them)."""
    from nodes.extract.terms import context_terms
    from nodes.extract.vectors import quantize, text_vector
    from nodes.load_evidence.neighbours import PREVIOUS_TURNS
    from store.exchanges import NewTurn
    from store.neighbours import NEIGHBOUR_CHARS
    from store.search_filter import dated_terms

    recent: dict[str, list[str]] = {}
    for t in turns:
        previous = recent.setdefault(t.session, [])
        when = datetime.fromisoformat(t.created_at.replace("Z", "+00:00")).timestamp()
        yield NewTurn(
            session=t.session, role=t.role, content=t.content,
            content_hash=hashlib.sha256(t.content.encode("utf-8")).digest(),
            created_at=when, vector=quantize(text_vector(t.content, dim, previous)),
            decisions=((f"use {t.decision[0]} for {t.decision[1]}",) if t.decision else ()),
            blockers=((f"{t.blocker} timeout",) if t.blocker else ()),
            context=context_terms(t.content, previous), dated=dated_terms(when))
        previous.insert(0, t.content[:NEIGHBOUR_CHARS])
        del previous[PREVIOUS_TURNS:]


class Corpus:
    """One backend's store, filled up to a size at a time through ``record_turn``."""

    def __init__(self, backends: Backends, backend: str, turns: list[Turn], batch: int,
                 reuse: str | None = None) -> None:
        from stenographer.app import open_app
        from stenographer.settings import Settings

        self.backends, self.backend, self.turns, self.batch = backends, backend, turns, batch
        if reuse is None:
            self.data_dir, self.url = backends.fresh(backend, "search")
        elif backend == "postgresql":
            self.data_dir, self.url = Path(tempfile.mkdtemp(dir=backends.root)), reuse
        else:
            self.data_dir, self.url = Path(reuse), None
        self.settings = Settings(data_dir=self.data_dir, database_url=self.url)
        self.app = open_app(self.settings)
        # A reused store was loaded by this benchmark: turn i is exchange i + 1.
        self.loaded = 0 if reuse is None else stored_turns(self.data_dir, self.url)
        self.ids: dict[int, int] = {i: i + 1 for i in range(self.loaded)}
        self.kept = False
        self.load_s = 0.0
        self.load_cpu_s = 0.0
        self._source = new_turns(turns, self.settings.vector_dim)

    def load_to(self, size: int, deadline: float) -> None:
        """Load turns until ``size`` are stored or the deadline (monotonic) passed."""
        from store.exchanges import record_turn

        if self.loaded >= size:
            return
        started, cpu = time.perf_counter(), time.process_time()
        while self.loaded < size and time.monotonic() < deadline:
            count = min(self.batch, size - self.loaded)
            with self.app.store.write() as conn:
                for _ in range(count):
                    rec = record_turn(conn, next(self._source))
                    self.ids[self.loaded] = rec.exchange_id
                    self.loaded += 1
            if self.loaded % 100_000 < self.batch:
                rate = self.loaded / (self.load_s + time.perf_counter() - started)
                print(f"  {self.backend}: {self.loaded:,} turns loaded ({rate:,.0f}/s)",
                      flush=True)
        self.load_s += time.perf_counter() - started
        self.load_cpu_s += time.process_time() - cpu

    def size(self) -> dict[str, Any]:
        if self.url is None:  # measure the file with the store closed (WAL checkpointed)
            self.app.close()
            out = self.backends.size(self.backend, self.data_dir, None)
            from stenographer.app import open_app

            self.app = open_app(self.settings)
            return out
        return self.backends.size(self.backend, self.data_dir, self.url)

    def close(self) -> None:
        self.app.close()
        if self.kept:
            print(f"  kept the {self.backend} store: {self.url or self.data_dir}", flush=True)
        else:
            shutil.rmtree(self.data_dir, ignore_errors=True)


def query_set(corpus: Corpus, count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` session-scoped requests and as many store-wide ones."""
    turns = corpus.turns[:corpus.loaded]
    scoped = [args for _, args, _ in build_queries(turns, corpus.ids, count, seed)]
    crossed = [{**args, "session_id": None, "cross_session": True} for args in scoped]
    return [{"scope": "session", **a} for a in scoped] + [{"scope": "store", **a}
                                                           for a in crossed]


def request(args: dict[str, Any]) -> dict[str, Any]:
    """The search graph's request as the query_history tool builds it."""
    return {"query": args["query"], "session_id": args.get("session_id"),
            "cross_session": bool(args.get("cross_session")), "limit": args["limit"],
            "cursor": None, "mode": "hybrid", "role": "any", "since": None, "until": None,
            "trace_id": None, "flag": None}


def in_process(corpus: Corpus, queries: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for scope in ("session", "store"):
        lat, errors, hits = [], [], 0
        for q in (q for q in queries if q["scope"] == scope):
            started = time.perf_counter()
            try:
                result, _ = corpus.app.run("search", request(q))
            except Exception as ex:
                errors.append(f"{type(ex).__name__}: {ex}"[:200])
                continue
            finally:
                lat.append((time.perf_counter() - started) * 1e3)
            hits += bool(result.get("hits"))
        out[scope] = {"latency_ms": summarize(lat), "errors": len(errors),
                      "error_samples": errors[:2], "with_hits": hits}
    return out


async def over_stdio(corpus: Corpus, queries: list[dict[str, Any]]) -> dict[str, Any]:
    env = {"STENO_DATABASE_URL": corpus.url} if corpus.url else {}
    out: dict[str, Any] = {}
    async with spawn_server(corpus.data_dir, stderr_name="search-stderr.log",
                            extra_env=env) as server:
        first = CallTimer(QUERY)
        await first.call(server, QUERY, {"query": "warm up", "cross_session": True})
        out["first_call_ms"] = first.latencies_ms[0]
        for scope in ("session", "store"):
            timer, hits = CallTimer(QUERY), 0
            for q in (q for q in queries if q["scope"] == scope):
                args = {k: v for k, v in request(q).items() if v is not None}
                result = await timer.call(server, QUERY, args)
                hits += bool(result is not None and structured(result).get("hits"))
            summary = timer.summary()
            out[scope] = {"latency_ms": summary["latency_ms"], "errors": summary["errors"],
                          "error_samples": summary["error_samples"], "with_hits": hits}
    return out


def search_backend(backends: Backends, backend: str, turns: list[Turn], sizes: list[int],
                   args: argparse.Namespace) -> list[dict[str, Any]]:
    corpus = Corpus(backends, backend, turns, args.batch, args.reuse)
    corpus.kept = args.keep
    if args.reuse:
        sizes = [corpus.loaded]
    deadline = time.monotonic() + args.load_budget
    results = []
    try:
        for size in sizes:
            corpus.load_to(size, deadline)
            queries = query_set(corpus, args.queries, seed=11)
            row: dict[str, Any] = {
                "backend": backend, "target": size, "turns": corpus.loaded,
                "load_s": round(corpus.load_s, 1), "load_cpu_s": round(corpus.load_cpu_s, 1),
                "load_turns_per_s": (round(corpus.loaded / corpus.load_s, 1)
                                     if corpus.load_s else None),
                "store": corpus.size()}
            load = Load()
            row["in_process"] = in_process(corpus, queries)
            row["stdio"] = anyio.run(over_stdio, corpus, queries)
            row["machine"] = load.stop()
            results.append(row)
            print(json.dumps(row)[:600], flush=True)
            if corpus.loaded < size:
                break  # the loading budget ran out: this is as far as it goes
    finally:
        corpus.close()
    return results


# --------------------------------------------------------------------------- report


def p(row: dict[str, Any], where: str, scope: str, q: str) -> str:
    cell = row[where][scope]
    if cell["errors"] and cell["errors"] >= cell["latency_ms"].get("count", 0):
        return "error"
    value = cell["latency_ms"].get(q)
    return f"{value:.1f}" if value is not None else "n/a"


def report(out: dict[str, Any]) -> None:
    if out.get("ingest"):
        print_table(
            ["backend", "writers", "turns", "wall s", "turns/s", "p50 ms", "p95 ms", "errors",
             "CPU ms/turn", "machine busy"],
            [[r["backend"], r["writers"], r["turns"], r["wall_s"], r["turns_per_s"],
              f"{r['latency_ms']['p50']:.1f}", f"{r['latency_ms']['p95']:.1f}", r["errors"],
              r["cpu_ms_per_turn"], r["machine"]["machine_busy_fraction"]]
             for r in out["ingest"]],
            title="\nIngest over MCP stdio (writer processes x turns each)")
    if out.get("search"):
        print_table(
            ["backend", "turns", "load s", "turns/s", "store", "session p50/p95 ms",
             "store-wide p50/p95 ms", "stdio session p50/p95", "stdio store-wide p50/p95"],
            [[r["backend"], f"{r['turns']:,}", r["load_s"], r["load_turns_per_s"],
              fmt_bytes(r["store"]["bytes"]),
              f"{p(r, 'in_process', 'session', 'p50')}/{p(r, 'in_process', 'session', 'p95')}",
              f"{p(r, 'in_process', 'store', 'p50')}/{p(r, 'in_process', 'store', 'p95')}",
              f"{p(r, 'stdio', 'session', 'p50')}/{p(r, 'stdio', 'session', 'p95')}",
              f"{p(r, 'stdio', 'store', 'p50')}/{p(r, 'stdio', 'store', 'p95')}"]
             for r in out["search"]],
            title="\nSearch (query_history): in process through the search graph, and over "
                  "one stdio server")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backends", default="sqlite,postgresql")
    ap.add_argument("--writers", default="1,8")
    ap.add_argument("--writer-turns", type=int, default=2_000)
    ap.add_argument("--inflight", type=int, default=4, help="calls in flight per writer")
    ap.add_argument("--repeat", type=int, default=1,
                    help="ingest runs per (backend, writers), alternating the backends")
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--queries", type=int, default=200, help="per scope and size")
    ap.add_argument("--batch", type=int, default=10_000, help="turns per load transaction")
    ap.add_argument("--load-budget", type=float, default=3_600.0,
                    help="seconds of loading per backend at most")
    ap.add_argument("--pg-url", help="use this running PostgreSQL server (its admin URL) "
                    "instead of starting one")
    ap.add_argument("--keep", action="store_true",
                    help="keep the search stores (their location is printed)")
    ap.add_argument("--reuse", help="query this kept store (a data directory, or a database "
                    "URL with --backends postgresql) instead of loading one")
    ap.add_argument("--no-ingest", action="store_true")
    ap.add_argument("--no-search", action="store_true")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", help="also write every figure to this file")
    args = ap.parse_args()
    if args.quick:
        args.writers, args.writer_turns, args.sizes, args.queries = "1,2", 200, "2000,5000", 20
    names = args.backends.split(",")
    root = Path(tempfile.mkdtemp(prefix="steno-backends-"))
    backends = Backends(root, names, args.pg_url)
    out: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "loadavg_at_start": os.getloadavg()},
        "args": vars(args), "ingest": [], "search": []}
    try:
        if not args.no_ingest:
            for rep in range(args.repeat):
                for backend in names if rep % 2 == 0 else names[::-1]:
                    for writers in (int(x) for x in args.writers.split(",")):
                        row = anyio.run(ingest_run, backends, backend, writers,
                                        args.writer_turns, args.inflight)
                        row["repeat"] = rep
                        out["ingest"].append(row)
                        print(json.dumps(row)[:400], flush=True)
        if not args.no_search:
            sizes = [int(x) for x in args.sizes.split(",")]
            started = time.perf_counter()
            turns = make_turns(max(sizes), session_turns=CORPUS_SESSION_TURNS)
            out["corpus_generation_s"] = round(time.perf_counter() - started, 1)
            for backend in names:
                out["search"].extend(search_backend(backends, backend, turns, sizes, args))
    finally:
        backends.close()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    report(out)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
