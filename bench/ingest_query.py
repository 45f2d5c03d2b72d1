"""Ingest throughput, query latency, reply sizes and storage cost over real stdio.

Run from the repository root::

    python bench/ingest_query.py [--raw-turns 20000] [--turns 2000] [--inflight 1,16]
    python bench/ingest_query.py --quick      # ~60 s smoke test (500 turns, 20 queries)

Two clients drive the server. A raw JSON-RPC client (``common.RawClient``: request
lines written to the server's stdin, reply lines read from its stdout, nothing else)
gives the headline figures: spawn -> first tool reply, the sequential ingest of
``--raw-turns`` turns, then query_history, compact_guard and a store-wide search on that
store, and more ingests, first on a quiet machine and then with one other process
keeping a core busy (``common.Busy``). Every one of those calls is followed by a floor
call, a tool call rejected by argument validation, so each latency is printed beside
its ratio to a floor measured under the same load. After the sequential ingest, the
bare SDK ``MCPServer`` with a no-op tool (``bench/noop_server.py``) is driven the same
way: what a tool call that does nothing costs on this machine in the same run. The
SDK's own ``Client`` figures follow (it costs about as much CPU per call as the
server's floor).

Everything goes through a real server subprocess (``python -m stenographer`` with
``OMEGA_STENOGRAPHER_DIR`` set to a fresh temporary directory) driven by the official
MCP SDK client over stdio, so every figure includes JSON-RPC framing, validation and
the pipe round trip, as an MCP host would see it.

What is measured (all figures also go to the JSON file):

* cold start: spawn -> completed handshake (``Client.__aenter__``), median of 5 spawns
  on an empty store; plus one spawn on the largest store after the run;
* ingest throughput for each turn count, with 1 call in flight (sequential) and with
  N calls in flight (pipelined across sessions: one task per session ingests its turns
  in order, a semaphore caps the calls in flight; turns are ~300 characters of
  deterministic software-work text, ~10% with a decision, ~10% with a blocker,
  sessions of 1,000 turns, ``created_at`` advancing);
* per-call latency p50 of the first and the last 1,000 calls of the largest run;
* after the largest run: query_history (200 queries), get_brief (100), compact_guard
  with a query (100): latency p50/p95 and reply sizes against the 8,000-char budget;
* store bytes per 1,000 turns: steno.db + -wal after the server stopped, and the main
  file after ``PRAGMA wal_checkpoint(TRUNCATE)``; raw text bytes for comparison.

If the sequential run of the largest turn count would not fit the time budget
(``--time-budget``, default 540 s), it is skipped and the pipelined run of that count
ingests its first and last session sequentially instead, so first/last-1,000 latencies
are still single-call latencies; the output says which run each figure comes from.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    REPO_ROOT,
    Busy,
    CallTimer,
    RawClient,
    Server,
    bytecode_caches,
    db_files,
    db_measure,
    fmt_bytes,
    fmt_ms,
    percentile,
    print_table,
    spawn_server,
    structured,
    summarize,
    wait_idle,
)

INGEST = "stenographer_ingest_exchange"
QUERY = "stenographer_query_history"
BRIEF = "stenographer_get_brief"
GUARD = "stenographer_compact_guard"
STATUS = "stenographer_capture_status"

BUDGET_CHARS = 8_000  # default STENO_MAX_CHARS of the read tools

TARGETS = {
    "ingest_tps": 500.0,  # turns/s over stdio
    "growth_ratio": 1.2,  # last-1000 p50 / first-1000 p50
    "query_p50_ms": 5.0,
    "brief_p50_ms": 10.0,
    "guard_p50_ms": 10.0,
    "db_bytes_per_1000": 1.2e6,
    "cold_start_s": 0.8,
}

# --------------------------------------------------------------------------- the corpus

TECH = ["Postgres", "SQLite", "Redis", "Kafka", "RabbitMQ", "gRPC", "GraphQL", "Celery",
        "Terraform", "Kubernetes", "Nginx", "ClickHouse", "DuckDB", "FastAPI", "Rust",
        "protobuf", "S3", "MinIO", "Prometheus", "OpenTelemetry"]
PURPOSE = ["caching", "the job queue", "session storage", "the audit log", "metrics",
           "feature flags", "the search index", "rate limiting", "the billing ledger",
           "blob storage", "tracing", "the event bus", "config management",
           "schema migrations", "the notification fan-out"]
COMPONENT = ["billing API", "auth service", "ingest worker", "scheduler", "parser",
             "report generator", "webhook relay", "search indexer", "export pipeline",
             "admin dashboard", "payment gateway", "sync daemon", "cache layer",
             "notification service", "CLI", "gateway"]
MODULE = ["store.exchanges", "nodes.extract", "graphs.search", "api.handlers",
          "core.retry", "utils.timefmt", "jobs.nightly", "auth.tokens", "db.pool",
          "cli.commands"]
FILE = ["config/settings.yaml", "src/server.py", "docs/architecture.md", "Makefile",
        "deploy/helm/values.yaml", "migrations/0042_add_index.sql", "README.md",
        "src/handlers/orders.py", "tests/test_retry.py", "pyproject.toml"]
NOUN = ["invoice", "session", "token", "webhook", "order", "tenant", "snapshot", "retry",
        "checksum", "cursor", "payload", "schema", "manifest", "quota", "backfill"]
LIB = ["pydantic", "httpx", "numpy", "sqlalchemy", "uvicorn", "pytest", "anyio", "orjson",
       "structlog", "boto3"]
TEAM = ["platform", "data", "mobile", "payments", "security", "support"]
JOB = ["deploy", "nightly build", "release", "canary rollout", "backfill", "smoke test"]

NEUTRAL = [
    "I refactored the {component} so that {module} reads its settings from {file}.",
    "The {component} now batches {noun} writes and flushes them every {n} seconds.",
    "Let me check how the {component} handles a {noun} when the {component2} restarts.",
    "I added {n} tests for the {module} module covering {noun} edge cases.",
    "Next step is to profile the {component} under {n} concurrent requests.",
    "The pull request for TICKET-{ticket} updates {file} and renames {noun} to {noun2}.",
    "Can you review the changes to {file} before we merge them into main?",
    "Benchmarks show the {component} serving {big} requests per second at p95 {n} ms.",
    "We should document the {noun} format in docs/{noun2}.md for the {team} team.",
    "I moved the {noun} parsing out of {file} into a helper in {module}.",
    "The staging cluster runs version 2.{n}.{m} of the {component} since this morning.",
    "Running the migration script on a copy of the {noun} table took {n} minutes.",
    "The {team} team asked whether the {component} exposes {noun} metrics.",
    "I bumped {lib} to 1.{n}.{m} and regenerated the lock file.",
    "The {noun} cache in the {component} now expires entries after {n} minutes.",
    "Here is the diff for {file}: the {noun} loop now streams rows instead of loading all.",
    "Looks good to me; the {noun} counters in the {component} match the dashboard now.",
    "I will pair with the {team} team tomorrow on the {noun} handling in {module}.",
]
DECISION = [
    "We decided to use {tech} for {purpose}.",
]
BLOCKER = [
    "The {job} is failing with a timeout on the {component}.",
]


@dataclass(frozen=True)
class Turn:
    index: int  # global, 0-based
    session: str
    role: str
    content: str
    created_at: str
    decision: tuple[str, str] | None  # (tech, purpose)
    blocker: str | None  # component


def ingest_request(t: Turn) -> dict[str, Any]:
    """The arguments of ``t``'s ingest (the tool's, and an ``ingest_batch`` item's)."""
    return {"session_id": t.session, "role": t.role, "content": t.content,
            "created_at": t.created_at}


def _fill(rng: random.Random, template: str) -> str:
    c1, c2 = rng.sample(COMPONENT, 2)
    n1, n2 = rng.sample(NOUN, 2)
    return template.format(
        component=c1, component2=c2, module=rng.choice(MODULE), file=rng.choice(FILE),
        noun=n1, noun2=n2, n=rng.randint(2, 60), m=rng.randint(0, 9),
        big=rng.randint(200, 9000), ticket=rng.randint(100, 9999), team=rng.choice(TEAM),
        lib=rng.choice(LIB), tech=rng.choice(TECH), purpose=rng.choice(PURPOSE),
        job=rng.choice(JOB))


def make_turns(n: int, *, session_turns: int, seed: int = 7) -> list[Turn]:
    """``n`` deterministic turns of ~300 characters in sessions of ``session_turns``."""
    rng = random.Random(seed)
    base = dt.datetime(2026, 1, 5, 9, 0, 0, tzinfo=dt.UTC)
    turns = []
    for i in range(n):
        roll = rng.random()
        special: str | None = None
        decision: tuple[str, str] | None = None
        blocker: str | None = None
        if roll < 0.10:
            decision = (rng.choice(TECH), rng.choice(PURPOSE))
            special = rng.choice(DECISION).format(tech=decision[0], purpose=decision[1])
        elif roll < 0.20:
            blocker = rng.choice(COMPONENT)
            special = rng.choice(BLOCKER).format(job=rng.choice(JOB), component=blocker)
        sentences: list[str] = []
        length = len(special) + 1 if special else 0
        while length < 270:
            s = _fill(rng, rng.choice(NEUTRAL))
            sentences.append(s)
            length += len(s) + 1
        if special:
            sentences.insert(rng.randrange(len(sentences) + 1), special)
        role = "user" if i % 2 == 0 else ("tool" if rng.random() < 0.1 else "assistant")
        when = base + dt.timedelta(seconds=20 * i + rng.randint(0, 9))
        turns.append(Turn(
            index=i, session=f"bench-{i // session_turns:04d}", role=role,
            content=" ".join(sentences), created_at=when.strftime("%Y-%m-%dT%H:%M:%SZ"),
            decision=decision, blocker=blocker))
    return turns


# --------------------------------------------------------------------------- ingest


@dataclass
class CallRecord:
    order: int  # order in which the call was sent
    turn: int
    started: float
    latency_ms: float
    phase: str  # "seq" or "pipe"
    server_ms: float | None  # the graph run's duration from the stage trace


class IngestRun:
    """One server, one fresh store, ``turns`` ingested with ``inflight`` calls at most."""

    def __init__(self, turns: list[Turn], inflight: int, data_dir: Path, *,
                 sandwich: bool) -> None:
        self.turns = turns
        self.inflight = inflight
        self.data_dir = data_dir
        self.sandwich = sandwich
        self.timer = CallTimer(INGEST)
        self.records: list[CallRecord] = []
        self.exchange_ids: dict[int, int] = {}
        self.extraction = {"decision_missed": 0, "decision_extra": 0, "blocker_missed": 0,
                           "blocker_extra": 0, "compressions": 0}
        self.extraction_samples: list[dict[str, Any]] = []
        self._order = 0
        self._in_flight = 0
        self.max_in_flight = 0

    async def _one(self, server: Server, turn: Turn, phase: str) -> None:
        order = self._order
        self._order += 1
        self._in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self._in_flight)
        started = time.perf_counter()
        try:
            result = await self.timer.call(server, INGEST, {
                "role": turn.role, "content": turn.content, "session_id": turn.session,
                "created_at": turn.created_at})
        finally:
            self._in_flight -= 1
        data = structured(result) if result is not None else {}
        graph_ms = (data.get("trace") or {}).get("duration_ms")
        self.records.append(CallRecord(order, turn.index, started,
                                       self.timer.latencies_ms[-1], phase,
                                       float(graph_ms) if graph_ms is not None else None))
        if result is None or result.is_error:
            return
        if isinstance(data.get("exchange_id"), int):
            self.exchange_ids[turn.index] = data["exchange_id"]
        self.extraction["compressions"] += len(data.get("compressed") or [])
        got_d, got_b = bool(data.get("decisions")), bool(data.get("blockers"))
        for kind, want, got in (("decision", turn.decision is not None, got_d),
                                ("blocker", turn.blocker is not None, got_b)):
            if want and not got:
                self.extraction[f"{kind}_missed"] += 1
            elif got and not want:
                self.extraction[f"{kind}_extra"] += 1
                if len(self.extraction_samples) < 5:
                    self.extraction_samples.append({
                        "kind": f"{kind}_extra", "turn": turn.index,
                        "extracted": data.get(f"{kind}s")})

    async def _session(self, server: Server, turns: list[Turn], sem: anyio.Semaphore,
                       phase: str) -> None:
        for turn in turns:  # in order within a session
            async with sem:
                await self._one(server, turn, phase)

    async def _pipelined(self, server: Server, turns: list[Turn]) -> None:
        by_session: dict[str, list[Turn]] = {}
        for turn in turns:
            by_session.setdefault(turn.session, []).append(turn)
        sem = anyio.Semaphore(self.inflight)
        async with anyio.create_task_group() as tg:
            for session_turns in by_session.values():
                tg.start_soon(self._session, server, session_turns, sem, "pipe")

    async def ingest(self, server: Server) -> dict[str, Any]:
        """Ingest every turn; return wall times for the whole run and its phases."""
        phases: dict[str, Any] = {}
        cpu_client, cpu_server = time.process_time(), server.cpu_s()
        started = time.perf_counter()
        if self.inflight <= 1:
            for turn in self.turns:
                await self._one(server, turn, "seq")
        elif self.sandwich:
            first = [t for t in self.turns if t.session == self.turns[0].session]
            last = [t for t in self.turns if t.session == self.turns[-1].session]
            middle = [t for t in self.turns
                      if t.session not in (self.turns[0].session, self.turns[-1].session)]
            for name, part in (("first_session_seq", first), ("middle_pipelined", middle),
                               ("last_session_seq", last)):
                t0 = time.perf_counter()
                if name == "middle_pipelined":
                    await self._pipelined(server, part)
                else:
                    for turn in part:
                        await self._one(server, turn, "seq")
                wall = time.perf_counter() - t0
                phases[name] = {"turns": len(part), "wall_s": wall,
                                "turns_per_s": len(part) / wall if wall else None}
        else:
            await self._pipelined(server, self.turns)
        wall = time.perf_counter() - started
        cpu_client = time.process_time() - cpu_client
        end_server = server.cpu_s()
        cpu_server = (end_server - cpu_server
                      if end_server is not None and cpu_server is not None else None)
        n = len(self.turns)
        return {"wall_s": wall, "turns_per_s": n / wall, "phases": phases,
                "cpu": {
                    "client_s": cpu_client, "server_s": cpu_server,
                    "client_ms_per_call": 1e3 * cpu_client / n,
                    "server_ms_per_call": 1e3 * cpu_server / n if cpu_server else None,
                    "note": "client = this benchmark process (MCP SDK client); server = the "
                            "stdio server process; both CPU-bound Python on the same host"}}

    def latency_windows(self, window: int) -> dict[str, Any]:
        """p50 of the first and last ``window`` calls (by send order), and per-tenth p50s."""
        recs = sorted(self.records, key=lambda r: r.order)
        lat = [r.latency_ms for r in recs]
        graph = [r.server_ms for r in recs]
        first, last = lat[:window], lat[-window:]
        g_first = [x for x in graph[:window] if x is not None]
        g_last = [x for x in graph[-window:] if x is not None]
        tenth = max(1, len(lat) // 10)
        curve = [percentile(lat[i:i + tenth], 50) for i in range(0, len(lat), tenth)]
        out = {
            "window": window,
            "first_phase": sorted({r.phase for r in recs[:window]}),
            "last_phase": sorted({r.phase for r in recs[-window:]}),
            "first_p50_ms": percentile(first, 50),
            "last_p50_ms": percentile(last, 50),
            "first_p95_ms": percentile(first, 95),
            "last_p95_ms": percentile(last, 95),
            "p50_per_tenth_ms": curve,
            "server_graph_first_p50_ms": percentile(g_first, 50),
            "server_graph_last_p50_ms": percentile(g_last, 50),
        }
        out["ratio"] = (out["last_p50_ms"] / out["first_p50_ms"]
                        if out["first_p50_ms"] else None)
        out["server_graph_ratio"] = (
            out["server_graph_last_p50_ms"] / out["server_graph_first_p50_ms"]
            if g_first and g_last and out["server_graph_first_p50_ms"] else None)
        return out


# --------------------------------------------------------------------------- read tools


def _decision_index(turns: list[Turn], ids: dict[int, int]
                    ) -> dict[str, dict[tuple[str, str], set[int]]]:
    out: dict[str, dict[tuple[str, str], set[int]]] = {}
    for t in turns:
        if t.decision and t.index in ids:
            out.setdefault(t.session, {}).setdefault(t.decision, set()).add(ids[t.index])
    return out


def _blocker_index(turns: list[Turn], ids: dict[int, int]) -> dict[str, dict[str, set[int]]]:
    out: dict[str, dict[str, set[int]]] = {}
    for t in turns:
        if t.blocker and t.index in ids:
            out.setdefault(t.session, {}).setdefault(t.blocker, set()).add(ids[t.index])
    return out


def build_queries(turns: list[Turn], ids: dict[int, int], count: int, seed: int
                  ) -> list[tuple[str, dict[str, Any], set[int] | None]]:
    """(kind, arguments, exchange ids that answer it or None) for query_history.

    A mix of natural-language questions built from the vocabulary: questions about a
    decision or a blocker recorded in that session (answerable: the ids are known),
    general how/what questions, short keyword queries and a few FTS5-syntax queries.
    """
    rng = random.Random(seed)
    sessions = sorted({t.session for t in turns})
    decisions = _decision_index(turns, ids)
    blockers = _blocker_index(turns, ids)
    out: list[tuple[str, dict[str, Any], set[int] | None]] = []
    for i in range(count):
        session = sessions[i % len(sessions)]
        roll = rng.random()
        target: set[int] | None = None
        if roll < 0.35 and decisions.get(session):
            (tech, purpose), target = rng.choice(sorted(decisions[session].items()))
            kind = "decision question"
            query = rng.choice([
                f"why did we decide to use {tech} for {purpose}?",
                f"what did we pick for {purpose}?",
                f"when did we choose {tech} for {purpose}",
            ])
            if "what did we pick" in query:
                target = {x for (_, p), s in decisions[session].items() if p == purpose
                          for x in s}
        elif roll < 0.55 and blockers.get(session):
            component, target = rng.choice(sorted(blockers[session].items()))
            kind = "blocker question"
            query = rng.choice([
                f"what is failing on the {component}?",
                f"why does the {component} time out?",
                f"is anything blocking the {component} deploy",
            ])
        elif roll < 0.80:
            kind = "general question"
            query = rng.choice([
                f"how does the {rng.choice(COMPONENT)} batch {rng.choice(NOUN)} writes?",
                f"which version of {rng.choice(LIB)} did we bump to?",
                f"what did the {rng.choice(TEAM)} team ask about {rng.choice(NOUN)} metrics?",
                f"where is the {rng.choice(NOUN)} format documented?",
                f"how long did the {rng.choice(NOUN)} table migration take?",
            ])
        elif roll < 0.92:
            kind = "keywords"
            query = rng.choice([
                f"{rng.choice(TECH)} {rng.choice(PURPOSE)}",
                f"{rng.choice(COMPONENT)} timeout",
                f"{rng.choice(MODULE)} {rng.choice(NOUN)}",
            ])
        else:
            kind = "fts syntax"
            query = rng.choice([
                f'"{rng.choice(COMPONENT)}" OR {rng.choice(TECH)}',
                f"migrat* {rng.choice(NOUN)}",
                f"NEAR({rng.choice(NOUN)} cache, 5)",
            ])
        out.append((kind, {"query": query, "session_id": session, "limit": 10}, target))
    return out


async def read_phase(server: Server, turns: list[Turn], ids: dict[int, int], *,
                     queries: int, briefs: int, guards: int, seed: int) -> dict[str, Any]:
    """Latency and reply size of the three read tools on the (large) store."""
    sessions = sorted({t.session for t in turns})
    timers = {name: CallTimer(name) for name in (QUERY, BRIEF, GUARD)}
    quality: dict[str, dict[str, int]] = {}
    zero_hit_samples: list[str] = []
    fallback_notes = 0

    # One call of each first, timed apart: the first use of a tool may pay one-off
    # costs (e.g. loading the in-memory vector copy), which are reported separately.
    first_calls: dict[str, float] = {}
    for tool, warm in ((QUERY, {"query": "warm up", "session_id": sessions[0]}),
                       (BRIEF, {"session_id": sessions[0]}),
                       (GUARD, {"session_id": sessions[0], "query": "warm up"})):
        started = time.perf_counter()
        await server.call(tool, warm)
        first_calls[tool] = (time.perf_counter() - started) * 1e3
    await anyio.to_thread.run_sync(wait_idle, server.pid)  # the index upkeep apart

    # The floor of one tool call over stdio: a call rejected by input validation
    # (empty session_id) does everything but run a graph; one follows every read call.
    floor = CallTimer("round-trip floor")

    for kind, args, target in build_queries(turns, ids, queries, seed):
        result = await timers[QUERY].call(server, QUERY, args)
        await floor.call(server, *FLOOR_CALL)
        q = quality.setdefault(kind, {"queries": 0, "zero_hits": 0, "answerable": 0,
                                      "answered_top10": 0})
        q["queries"] += 1
        if result is None or result.is_error:
            continue
        data = structured(result)
        hits = data.get("hits") or []
        fallback_notes += bool(data.get("notes"))
        if not hits:
            q["zero_hits"] += 1
            if len(zero_hit_samples) < 5:
                zero_hit_samples.append(args["query"])
        if target:
            q["answerable"] += 1
            if any(h.get("exchange_id") in target for h in hits):
                q["answered_top10"] += 1

    rng = random.Random(seed + 1)
    for i in range(briefs):
        await timers[BRIEF].call(server, BRIEF, {"session_id": sessions[i % len(sessions)]})
        await floor.call(server, *FLOOR_CALL)
    for i in range(guards):
        query = rng.choice([
            f"next steps on the {rng.choice(COMPONENT)} {rng.choice(NOUN)} handling",
            f"using {rng.choice(TECH)} for {rng.choice(PURPOSE)}",
            f"{rng.choice(JOB)} timeout on the {rng.choice(COMPONENT)}",
        ])
        await timers[GUARD].call(server, GUARD, {
            "session_id": sessions[i % len(sessions)], "query": query})
        await floor.call(server, *FLOOR_CALL)
    floor_rejected = len(floor.errors)

    return {
        "query_history": timers[QUERY].summary(BUDGET_CHARS)
        | {"by_kind": quality, "zero_hit_samples": zero_hit_samples,
           "replies_with_notes": fallback_notes},
        "get_brief": timers[BRIEF].summary(BUDGET_CHARS),
        "compact_guard": timers[GUARD].summary(BUDGET_CHARS),
        "first_call_ms": first_calls,
        "round_trip_floor": {"latency_ms": summarize(floor.latencies_ms),
                             "calls": len(floor.latencies_ms), "rejected": floor_rejected,
                             "what": "get_brief with session_id='' (rejected by input "
                                     "validation: SDK + stdio round trip, no graph)"},
    }


# --------------------------------------------------------------------------- raw client

# The floor: a tool call that the SDK rejects by argument validation (an empty
# session_id): the JSON-RPC framing, the pipe round trip, validation and the error
# reply, no graph. Each measured call is followed by one, so both see the same load.
FLOOR_CALL = (BRIEF, {"session_id": ""})

RAW_TARGETS = {  # p50 ms, p50 / floor p50; busy p50 / quiet p50 at most 1.5
    "ingest": (1.0, 2.0),
    "query_history": (2.0, 4.0),
    "compact_guard": (3.0, 6.0),
    "store-wide search": (5.0, 10.0),
}
BUSY_LIMIT = 1.5


def _reply_bytes(result: dict[str, Any]) -> int:
    return len(json.dumps(result, ensure_ascii=False).encode("utf-8"))


def _paired(raw: RawClient, tool: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """Each call followed by a floor call; latencies, floor latencies, reply sizes,
    errors and the server CPU of both per pair."""
    lat, floor, sizes, errors, results = [], [], [], [], []
    cpu0 = raw.cpu_s()
    for args in calls:
        ms, result = raw.call(tool, args)
        lat.append(ms)
        sizes.append(_reply_bytes(result))
        results.append(result)
        if "error" in result or result.get("isError"):
            errors.append(str(result)[:300])
        fms, fresult = raw.call(*FLOOR_CALL)
        floor.append(fms)
        if not (fresult.get("isError") or "error" in fresult):
            raise RuntimeError(f"the floor call was not rejected: {fresult}")
    cpu1 = raw.cpu_s()
    p50, f50 = percentile(lat, 50), percentile(floor, 50)
    return {"calls": len(lat), "latency_ms": summarize(lat), "floor_ms": summarize(floor),
            "ratio_p50": p50 / f50 if f50 else None,
            "reply_bytes_median": percentile(sizes, 50),
            "server_cpu_ms_per_pair": (1e3 * (cpu1 - cpu0) / len(lat)
                                       if cpu0 is not None and cpu1 is not None and lat
                                       else None),
            "errors": len(errors), "error_samples": errors[:3], "results": results}


def _floor_cpu(raw: RawClient, calls: int) -> float | None:
    """Server CPU ms of one floor call (a run of floor calls alone)."""
    cpu0 = raw.cpu_s()
    for _ in range(calls):
        raw.call(*FLOOR_CALL)
    cpu1 = raw.cpu_s()
    return 1e3 * (cpu1 - cpu0) / calls if cpu0 is not None and cpu1 is not None else None


NOOP_SERVER = Path(__file__).resolve().parent / "noop_server.py"
NOOP_CALL = ("noop", {"text": "x"})
NOOP_REJECTED = ("noop", {"text": 5})  # rejected by the SDK's argument validation


def noop_floor(root: Path, calls: int) -> dict[str, Any]:
    """The bare SDK ``MCPServer`` with a no-op tool (bench/noop_server.py, the SDK's own
    stdio transport), driven by the same raw client: each no-op call followed by a call
    it rejects by validation, as the server's own calls are. What a tool call that
    does nothing costs on this machine now."""
    with RawClient(root / "noop", argv=[sys.executable, str(NOOP_SERVER)]) as raw:
        for _ in range(100):
            raw.call(*NOOP_CALL)
        lat, rejected = [], []
        cpu0 = raw.cpu_s()
        for _ in range(calls):
            lat.append(raw.call(*NOOP_CALL)[0])
            rejected.append(raw.call(*NOOP_REJECTED)[0])
        cpu1 = raw.cpu_s()
        for _ in range(calls):
            raw.call(*NOOP_REJECTED)
        cpu2 = raw.cpu_s()
    known = cpu0 is not None and cpu1 is not None and cpu2 is not None
    return {"calls": calls, "latency_ms": summarize(lat), "rejected_ms": summarize(rejected),
            "server_cpu_ms_per_call": (1e3 * ((cpu1 - cpu0) - (cpu2 - cpu1)) / calls
                                       if known else None),
            "server_cpu_ms_per_rejected": 1e3 * (cpu2 - cpu1) / calls if known else None,
            "calls_per_s": 1e3 * calls / sum(lat)}


def _read_calls(turns: list[Turn], ids: dict[int, int], args: argparse.Namespace
                ) -> dict[str, list[dict[str, Any]]]:
    sessions = sorted({t.session for t in turns})
    queries = [a for _, a, _ in build_queries(turns, ids, args.queries, args.seed + 100)]
    rng = random.Random(args.seed + 101)
    guards = []
    for i in range(args.guards):
        query = rng.choice([
            f"next steps on the {rng.choice(COMPONENT)} {rng.choice(NOUN)} handling",
            f"using {rng.choice(TECH)} for {rng.choice(PURPOSE)}",
            f"{rng.choice(JOB)} timeout on the {rng.choice(COMPONENT)}",
        ])
        guards.append({"session_id": sessions[i % len(sessions)], "query": query})
    wide = [{"query": a["query"], "cross_session": True, "limit": 10}
            for a in queries[: args.wide_queries]]
    return {"query_history": queries, "compact_guard": guards, "store-wide search": wide}


_READ_TOOL = {"query_history": QUERY, "compact_guard": GUARD, "store-wide search": QUERY}


def raw_phase(turns: list[Turn], root: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Spawn -> first tool reply, the sequential ingest of ``turns`` and the read tools
    on the resulting store, quiet and with one core busy, with a raw JSON-RPC client."""
    out: dict[str, Any] = {"turns": len(turns)}
    first, handshake = [], []
    for i in range(args.cold_starts):
        with RawClient(root / f"raw-cold-{i}") as raw:
            t = turns[0]
            raw.call(INGEST, ingest_request(t))
            first.append(raw.first_reply_s)
            handshake.append(raw.handshake_s)
    out["spawn_first_reply_s"] = {"values": first, "median": statistics.median(first),
                                  "handshake_median": statistics.median(handshake),
                                  "what": "spawn -> handshake -> reply of a first ingest"}
    print(f"  raw: spawn -> first tool reply median {out['spawn_first_reply_s']['median']:.3f}"
          f" s", flush=True)

    data_dir = root / f"raw-{len(turns)}"
    with RawClient(data_dir) as raw:
        ids: dict[int, int] = {}
        ingest_calls = [ingest_request(t) for t in turns]
        # the first call waits for the store and the graphs to open: timed apart
        first_ms, first_result = raw.call(INGEST, ingest_calls[0])
        started = time.perf_counter()
        ingest = _paired(raw, INGEST, ingest_calls[1:])
        wall = time.perf_counter() - started
        ingest["first_call_ms"] = first_ms
        for t, result in zip(turns, [first_result, *ingest.pop("results")], strict=True):
            sc = result.get("structuredContent") or {}
            if isinstance(sc.get("exchange_id"), int):
                ids[t.index] = sc["exchange_id"]
        floor_cpu = _floor_cpu(raw, 500)
        seq_ms = ingest["latency_ms"]["mean"] * ingest["calls"]
        ingest["turns_per_s"] = 1e3 * ingest["calls"] / seq_ms  # ingest calls only
        ingest["wall_s_with_floor_calls"] = wall
        ingest["floor_cpu_ms"] = floor_cpu
        if ingest["server_cpu_ms_per_pair"] is not None and floor_cpu is not None:
            ingest["server_cpu_ms_per_ingest"] = ingest["server_cpu_ms_per_pair"] - floor_cpu
        out["ingest"] = ingest
        print(f"  raw: ingest {len(turns):,} turns sequential: {ingest['turns_per_s']:.0f} "
              f"turns/s, p50 {fmt_ms(ingest['latency_ms']['p50'])} "
              f"({ingest['ratio_p50']:.2f}x floor)", flush=True)
        noop = out["noop"] = noop_floor(root, min(2000, len(turns)))
        print(f"  raw: bare MCPServer no-op tool: {noop['calls_per_s']:.0f} calls/s, p50 "
              f"{fmt_ms(noop['latency_ms']['p50'])}, server CPU "
              f"{fmt_ms(noop['server_cpu_ms_per_call'])} a call", flush=True)

        plan = _read_calls(turns, ids, args)
        reads: dict[str, dict[str, Any]] = {}
        for load in ("quiet", "busy"):
            with Busy() if load == "busy" else _Quiet():
                for name, calls in plan.items():
                    tool = _READ_TOOL[name]
                    raw.call(tool, calls[0])  # one-off costs (in-memory copies) apart
                    wait_idle(raw.pid)  # and the index upkeep that a first search starts
                    r = _paired(raw, tool, calls)
                    r.pop("results")
                    reads.setdefault(name, {})[load] = r
                    print(f"  raw: {name} ({load}) p50 {fmt_ms(r['latency_ms']['p50'])} "
                          f"({r['ratio_p50']:.2f}x floor)", flush=True)
            # ingest under the same two loads: more turns in sessions of their own
            extra = make_turns(len(turns) + args.load_turns, session_turns=args.session_turns,
                               seed=args.seed + 1 + (load == "busy"))[len(turns):]
            r = _paired(raw, INGEST, [{"role": t.role, "content": t.content,
                                       "session_id": f"{load}-{t.session}",
                                       "created_at": t.created_at} for t in extra])
            r.pop("results")
            reads.setdefault("ingest", {})[load] = r
            print(f"  raw: ingest ({load}) p50 {fmt_ms(r['latency_ms']['p50'])} "
                  f"({r['ratio_p50']:.2f}x floor)", flush=True)
        out["reads"] = reads
    out["loadavg"] = list(os.getloadavg())
    return out


class _Quiet:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


# --------------------------------------------------------------------------- runs


async def cold_starts(root: Path, count: int) -> dict[str, Any]:
    starts, stops = [], []
    for i in range(count):
        async with spawn_server(root / f"cold-{i}") as srv:
            pass
        starts.append(srv.start_s)
        stops.append(srv.stop_s)
    return {"spawns": count, "start_s": starts, "median_s": statistics.median(starts),
            "stop_s_median": statistics.median(stops)}


def _stderr_findings(text: str) -> dict[str, Any]:
    lines = text.splitlines()
    bad = [ln for ln in lines
           if any(w in ln for w in ("Traceback", "Error", "ERROR", "WARNING", "Warning"))]
    return {"lines": len(lines), "suspicious_lines": len(bad), "samples": bad[:8]}


async def ingest_run(turns: list[Turn], inflight: int, root: Path, *, sandwich: bool,
                     window: int, read_args: dict[str, Any] | None) -> dict[str, Any]:
    n = len(turns)
    data_dir = root / f"ingest-{n}-x{inflight}"
    run = IngestRun(turns, inflight, data_dir, sandwich=sandwich)
    label = "sequential" if inflight <= 1 else (
        f"pipelined x{inflight}" + (" (first+last session sequential)" if sandwich else ""))
    print(f"  ingest {n:,} turns, {label} ...", flush=True)
    reads: dict[str, Any] | None = None
    async with spawn_server(data_dir) as srv:
        result = await run.ingest(srv)
        print(f"    {result['turns_per_s']:.0f} turns/s ({result['wall_s']:.1f} s)", flush=True)
        if read_args is not None:
            print(f"  read tools on the {n:,}-turn store ...", flush=True)
            reads = await read_phase(srv, turns, run.exchange_ids, **read_args)
    stopped = db_files(data_dir)
    stderr = srv.stderr_text()
    restart: dict[str, Any] | None = None
    if read_args is not None:  # the largest store: a second cold start, and a count check
        async with spawn_server(data_dir, stderr_name="restart-stderr.log") as again:
            started = time.perf_counter()
            await again.call(QUERY, {"query": "why did we decide to use Redis for caching?",
                                     "session_id": turns[-1].session, "limit": 10})
            first_query_ms = (time.perf_counter() - started) * 1e3
            status = await again.call(STATUS, {})
            restart = {"start_s": again.start_s, "first_query_history_ms": first_query_ms,
                       "status_text": status.content[0].text[:600] if status.content else ""}
        stderr += again.stderr_text()
    measured = db_measure(data_dir)
    raw = sum(len(t.content.encode("utf-8")) for t in turns)
    with_wal = stopped["steno.db"] + stopped["steno.db-wal"]
    out: dict[str, Any] = {
        "turns": n,
        "sessions": len({t.session for t in turns}),
        "inflight": inflight,
        "mode": label,
        "max_in_flight_observed": run.max_in_flight,
        **result,
        "ingest_calls": run.timer.summary(),
        "server_stop_s": srv.stop_s,
        "extraction_check": run.extraction | {"samples": run.extraction_samples},
        "latency_windows": run.latency_windows(min(window, max(1, n // 5))),
        "store": {
            "files_after_stop": stopped,
            "db_plus_wal_bytes": with_wal,
            "db_plus_wal_bytes_per_1000": with_wal / (n / 1000),
            "after_truncate_checkpoint": measured,
            "main_file_bytes_per_1000": measured["main_file_bytes"] / (n / 1000),
            "raw_text_bytes": raw,
            "raw_text_bytes_per_1000": raw / (n / 1000),
            "amplification": with_wal / raw if raw else None,
        },
        "server_stderr": _stderr_findings(stderr),
    }
    if reads is not None:
        out["reads"] = reads
    if restart is not None:
        out["restart_on_full_store"] = restart
    return out


async def run_all(args: argparse.Namespace) -> dict[str, Any]:
    t_start = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="steno-bench-"))
    report: dict[str, Any] = {
        "benchmark": "ingest_query",
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "loadavg_start": list(os.getloadavg()),
        "repo": str(REPO_ROOT),
        "settings": {k: v for k, v in vars(args).items() if k != "out"},
        "targets": TARGETS,
        "runs": [],
        "skipped": [],
    }
    try:
        print(f"cold start: {args.cold_starts} spawns on an empty store ...", flush=True)
        report["cold_start"] = await cold_starts(root, args.cold_starts)
        print(f"  median {report['cold_start']['median_s']:.3f} s", flush=True)

        if args.raw_turns:
            print(f"raw JSON-RPC client: {args.raw_turns:,} turns ...", flush=True)
            report["raw"] = raw_phase(
                make_turns(args.raw_turns, session_turns=args.session_turns, seed=args.seed),
                root, args)
        largest = max(args.turns)
        all_turns = make_turns(largest, session_turns=args.session_turns, seed=args.seed)
        seq_rate: float | None = None
        pipe_rate: float | None = None
        for n in sorted(args.turns):
            turns = all_turns[:n]
            modes = sorted(args.inflight)
            sandwich = False
            if 1 in modes and n == largest and n != min(args.turns) and seq_rate:
                # will the sequential run fit the time budget?
                elapsed = time.perf_counter() - t_start
                est_seq = 1.15 * n / seq_rate
                est_rest = sum(1.15 * n / max(pipe_rate or 0.0, seq_rate)
                               for m in modes if m > 1)
                est_rest += 40.0  # read tools, restarts, checkpoints
                if elapsed + est_seq + est_rest > args.time_budget:
                    modes = [m for m in modes if m > 1]
                    sandwich = bool(modes)
                    note = (f"sequential {n:,}-turn run skipped: estimated {est_seq:.0f} s "
                            f"would exceed the {args.time_budget:.0f} s budget "
                            f"(elapsed {elapsed:.0f} s); first/last-session latencies come "
                            f"from sequential phases of the pipelined run instead")
                    report["skipped"].append(note)
                    print(f"  NOTE: {note}", flush=True)
            for i, inflight in enumerate(modes):
                is_query_run = n == largest and i == len(modes) - 1
                read_args = ({"queries": args.queries, "briefs": args.briefs,
                              "guards": args.guards, "seed": args.seed + 100}
                             if is_query_run else None)
                run = await ingest_run(turns, inflight, root, sandwich=sandwich and inflight > 1,
                                       window=args.window, read_args=read_args)
                report["runs"].append(run)
                rate = run["turns_per_s"]
                if inflight <= 1:
                    seq_rate = rate
                else:
                    pipe_rate = rate
    finally:
        report["total_wall_s"] = time.perf_counter() - t_start
        report["loadavg_end"] = list(os.getloadavg())
        if args.keep:
            report["data_root"] = str(root)
        else:
            shutil.rmtree(root, ignore_errors=True)
    return report


# --------------------------------------------------------------------------- report


def _ok(passed: bool | None) -> str:
    return "n/a" if passed is None else ("PASS" if passed else "FAIL")


def render_raw(report: dict[str, Any]) -> None:
    raw = report["raw"]
    rows: list[list[Any]] = []
    sf = raw["spawn_first_reply_s"]
    rows.append([f"spawn -> first tool reply (median of {len(sf['values'])})",
                 f"{sf['median']:.3f} s", "", "", "", "", "<= 0.7 s", _ok(sf["median"] <= 0.7)])
    ing = raw["ingest"]
    rows.append([f"ingest, sequential, {raw['turns']:,} turns: turns/s",
                 f"{ing['turns_per_s']:.0f}", "", "", "", "", ">= 1,000",
                 _ok(ing["turns_per_s"] >= 1000)])
    for name, by_load in raw["reads"].items():
        quiet, busy = by_load["quiet"], by_load["busy"]
        q50, b50 = quiet["latency_ms"]["p50"], busy["latency_ms"]["p50"]
        limit_ms, limit_ratio = RAW_TARGETS[name]
        passed = (q50 <= limit_ms and (quiet["ratio_p50"] or 1e9) <= limit_ratio
                  and b50 / q50 <= BUSY_LIMIT)
        label = name if name != "ingest" else f"ingest ({quiet['calls']} more turns each)"
        rows.append([f"{label} p50 / p95", f"{fmt_ms(q50)} / {fmt_ms(quiet['latency_ms']['p95'])}",
                     fmt_ms(quiet["floor_ms"]["p50"]), f"{quiet['ratio_p50']:.2f}x",
                     f"{fmt_ms(b50)} ({busy['ratio_p50']:.2f}x)", f"{b50 / q50:.2f}",
                     f"<= {limit_ms:g} ms, <= {limit_ratio:g}x, busy <= {BUSY_LIMIT}",
                     _ok(passed)])
        rows.append(["  reply bytes median; server CPU per call + floor call",
                     f"{quiet['reply_bytes_median']:.0f} B",
                     "", "", "", "", fmt_ms(quiet["server_cpu_ms_per_pair"]), ""])
    if ing.get("server_cpu_ms_per_ingest") is not None:
        rows.append(["server CPU per ingest / per floor call",
                     f"{fmt_ms(ing['server_cpu_ms_per_ingest'])} / "
                     f"{fmt_ms(ing['floor_cpu_ms'])}", "", "", "", "", "", ""])
    noop = raw.get("noop")
    if noop is not None:
        n50 = noop["latency_ms"]["p50"]
        rows.append(["bare MCPServer no-op tool (SDK stdio): calls/s, p50 (its rejected call)",
                     f"{noop['calls_per_s']:.0f}, {fmt_ms(n50)}",
                     fmt_ms(noop["rejected_ms"]["p50"]),
                     f"ingest {ing['latency_ms']['p50'] / n50:.2f}x", "", "", "", ""])
        rows.append(["  server CPU per no-op call / per rejected call",
                     f"{fmt_ms(noop['server_cpu_ms_per_call'])} / "
                     f"{fmt_ms(noop['server_cpu_ms_per_rejected'])}", "", "", "", "", "", ""])
    print()
    print_table(["figure", "quiet", "floor p50", "ratio", "busy (ratio)", "busy/quiet",
                 "target", ""], rows,
                title=f"Raw JSON-RPC client over stdio, each call followed by a floor call "
                      f"(a call rejected by validation); load average "
                      f"{report['loadavg_start'][0]:.2f} at start, "
                      f"{raw['loadavg'][0]:.2f} after")


def render(report: dict[str, Any]) -> None:
    if "raw" in report:
        render_raw(report)
    runs = report["runs"]
    largest_n = max(r["turns"] for r in runs)
    big = [r for r in runs if r["turns"] == largest_n]
    seq_big = next((r for r in big if r["inflight"] <= 1), None)
    query_run = next(r for r in runs if "reads" in r)
    rows: list[list[Any]] = []

    cs = report["cold_start"]
    rows.append([f"cold start (median of {cs['spawns']}, empty store)",
                 f"{cs['median_s']:.3f} s", "<= 0.8 s",
                 _ok(cs["median_s"] <= TARGETS["cold_start_s"])])
    if "restart_on_full_store" in query_run:
        rs = query_run["restart_on_full_store"]["start_s"]
        rows.append([f"cold start (1 spawn, {largest_n:,}-turn store)", f"{rs:.3f} s",
                     "<= 0.8 s", _ok(rs <= TARGETS["cold_start_s"])])

    for r in runs:
        label = f"ingest {r['turns']:,} turns, {r['mode']}"
        if r["inflight"] > 1:
            label += f"; max in flight {r['max_in_flight_observed']}"
        rows.append([label, f"{r['turns_per_s']:.0f} turns/s", ">= 500 turns/s",
                     _ok(r["turns_per_s"] >= TARGETS["ingest_tps"])])
        mid = r["phases"].get("middle_pipelined")
        if mid:
            rows.append([f"  of which pipelined middle ({mid['turns']:,} turns)",
                         f"{mid['turns_per_s']:.0f} turns/s", ">= 500 turns/s",
                         _ok(mid["turns_per_s"] >= TARGETS["ingest_tps"])])
        lat = r["ingest_calls"]["latency_ms"]
        srv = r["ingest_calls"]["server_graph_ms"]
        rows.append(["  per-call p50/p95 (server graph p50)",
                     f"{fmt_ms(lat.get('p50'))} / {fmt_ms(lat.get('p95'))} "
                     f"({fmt_ms(srv.get('p50'))})", "", ""])
        cpu = r["cpu"]
        rows.append(["  CPU per call: server process / client process",
                     f"{fmt_ms(cpu['server_ms_per_call'])} / "
                     f"{fmt_ms(cpu['client_ms_per_call'])}", "", ""])

    src = seq_big or next(r for r in big if r["inflight"] > 1)
    w = src["latency_windows"]
    how = ("sequential run" if src["inflight"] <= 1 else
           ("sequential first/last session of the pipelined run"
            if src["phases"] else f"pipelined run x{src['inflight']} (includes queueing)"))
    rows.append([f"ingest p50 first {w['window']:,} calls ({how})",
                 fmt_ms(w["first_p50_ms"]), "", ""])
    rows.append([f"ingest p50 last {w['window']:,} calls", fmt_ms(w["last_p50_ms"]), "", ""])
    rows.append(["  last/first ratio", f"{w['ratio']:.2f}", "<= 1.2",
                 _ok(w["ratio"] is not None and w["ratio"] <= TARGETS["growth_ratio"])])
    if w.get("server_graph_ratio") is not None:
        rows.append(["  same windows, server graph time p50 first / last (ratio)",
                     f"{fmt_ms(w['server_graph_first_p50_ms'])} / "
                     f"{fmt_ms(w['server_graph_last_p50_ms'])} "
                     f"({w['server_graph_ratio']:.2f})", "", ""])

    reads = query_run["reads"]
    for key, name, target in (("query_history", "query_history", "query_p50_ms"),
                              ("get_brief", "get_brief", "brief_p50_ms"),
                              ("compact_guard", "compact_guard", "guard_p50_ms")):
        s = reads[key]
        lat = s["latency_ms"]
        limit = TARGETS[target]
        floor_p50 = reads["round_trip_floor"]["latency_ms"].get("p50")
        rows.append([f"{name} p50 / p95 ({s['calls']} calls, {largest_n:,}-turn store; "
                     "ratio to the floor)",
                     f"{fmt_ms(lat.get('p50'))} / {fmt_ms(lat.get('p95'))} "
                     f"({lat.get('p50', 0) / floor_p50:.1f}x)",
                     f"p50 <= {limit:.0f} ms", _ok(lat.get("p50", 1e9) <= limit)])
        rc = s["reply_chars"]
        rows.append([f"  reply chars median / max (budget {BUDGET_CHARS:,})",
                     f"{rc['median']:.0f} / {rc['max']}",
                     f"<= {BUDGET_CHARS:,}", _ok(s["within_budget"])])
        if s["errors"]:
            rows.append(["  errors", str(s["errors"]), "0", "FAIL"])

    fl = reads["round_trip_floor"]
    rows.append([f"stdio round-trip floor p50 / p95 ({fl['calls']} calls rejected by "
                 "validation, no graph, one after each read call)",
                 f"{fmt_ms(fl['latency_ms'].get('p50'))} / "
                 f"{fmt_ms(fl['latency_ms'].get('p95'))}", "", ""])
    first = reads["first_call_ms"]
    rows.append(["first call after the ingest: query_history / get_brief / compact_guard",
                 f"{fmt_ms(first[QUERY])} / {fmt_ms(first[BRIEF])} / {fmt_ms(first[GUARD])}",
                 "", ""])
    if "restart_on_full_store" in query_run:
        rows.append(["first query_history after a restart",
                     fmt_ms(query_run["restart_on_full_store"]["first_query_history_ms"]),
                     "", ""])

    st = query_run["store"]
    rows.append([f"store bytes / 1,000 turns (steno.db + -wal after stop, {largest_n:,})",
                 fmt_bytes(st["db_plus_wal_bytes_per_1000"]), "<= 1.2 MB",
                 _ok(st["db_plus_wal_bytes_per_1000"] <= TARGETS["db_bytes_per_1000"])])
    rows.append(["  main file after wal_checkpoint(TRUNCATE) / 1,000 turns",
                 fmt_bytes(st["main_file_bytes_per_1000"]), "<= 1.2 MB",
                 _ok(st["main_file_bytes_per_1000"] <= TARGETS["db_bytes_per_1000"])])
    rows.append(["  raw text / 1,000 turns (amplification)",
                 f"{fmt_bytes(st['raw_text_bytes_per_1000'])} ({st['amplification']:.1f}x)",
                 "", ""])

    print()
    print_table(["figure", "measured", "target", ""], rows,
                title=f"Omega Stenographer over stdio — {report['when']}, "
                      f"{report['cpus']} CPUs, Python {report['python']}")

    # where the time goes, and what looked wrong
    print()
    stage_rows = []
    for name, s in (("ingest", src["ingest_calls"]), ("query_history", reads["query_history"]),
                    ("get_brief", reads["get_brief"]), ("compact_guard", reads["compact_guard"])):
        stages = list(s["stages_ms_p50"].items())[:5]
        stage_rows.append([name, fmt_ms(s["server_graph_ms"].get("p50")),
                           ", ".join(f"{k} {v:.2f}" for k, v in stages)])
    print_table(["tool", "server graph p50", "slowest stages (p50 ms)"], stage_rows,
                title=f"Server-side stage trace ({largest_n:,}-turn runs)")

    print()
    q = reads["query_history"]
    qrows = [[k, v["queries"], v["zero_hits"],
              f"{v['answered_top10']}/{v['answerable']}" if v["answerable"] else "-"]
             for k, v in sorted(q["by_kind"].items())]
    print_table(["query kind", "queries", "zero hits", "answer in top 10"], qrows,
                title="query_history result check")

    notes = list(report["skipped"])
    for r in runs:
        ex = r["extraction_check"]
        if any(ex[k] for k in ("decision_missed", "decision_extra", "blocker_missed",
                               "blocker_extra")):
            notes.append(f"{r['turns']:,}/{r['mode']}: extraction check {ex}")
        if r["ingest_calls"]["errors"]:
            notes.append(f"{r['turns']:,}/{r['mode']}: {r['ingest_calls']['errors']} ingest "
                         f"errors, e.g. {r['ingest_calls']['error_samples'][:2]}")
        if r["server_stderr"]["suspicious_lines"]:
            notes.append(f"{r['turns']:,}/{r['mode']}: server stderr "
                         f"{r['server_stderr']['samples'][:3]}")
        if r["store"]["files_after_stop"]["steno.db-wal"]:
            notes.append(f"{r['turns']:,}/{r['mode']}: WAL not checkpointed at stop "
                         f"({fmt_bytes(r['store']['files_after_stop']['steno.db-wal'])})")
        if r["server_stop_s"] > 1.5:
            notes.append(f"{r['turns']:,}/{r['mode']}: server took {r['server_stop_s']:.1f} s "
                         f"to exit after stdin closed")
    objs = st["after_truncate_checkpoint"].get("objects_bytes") or {}
    if objs:
        top = ", ".join(f"{k} {fmt_bytes(v)}" for k, v in list(objs.items())[:6])
        notes.append(f"largest store objects ({largest_n:,} turns): {top}")
    print()
    print("Notes:")
    for line in notes or ["none"]:
        print(f"- {line}")
    print(f"- total benchmark wall time {report['total_wall_s']:.0f} s; load average "
          f"(1 min) {report['loadavg_start'][0]:.2f} at start, "
          f"{report['loadavg_end'][0]:.2f} at end on {report['cpus']} CPUs — other "
          f"processes on the host skew every figure above")


def _ints(text: str) -> list[int]:
    try:
        values = [int(x.replace("_", "")) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers: {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers: {text!r}")
    return values


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--raw-turns", type=int, default=None,
                   help="turns ingested with the raw JSON-RPC client before its read "
                        "figures, quiet and busy (default 20000; 0: no raw phase)")
    p.add_argument("--wide-queries", type=int, default=None,
                   help="store-wide searches of the raw phase (100)")
    p.add_argument("--load-turns", type=int, default=None,
                   help="turns ingested quiet and again busy after the raw reads (500)")
    p.add_argument("--turns", type=_ints, default=None,
                   help="turn counts to ingest with the SDK Client, comma-separated "
                        "(default 2000)")
    p.add_argument("--inflight", type=_ints, default=[1],
                   help="calls in flight per SDK Client run, comma-separated; "
                        "1 = sequential (default 1)")
    p.add_argument("--session-turns", type=int, default=None,
                   help="turns per session (default 1000; 100 with --quick)")
    p.add_argument("--queries", type=int, default=None, help="query_history calls (200)")
    p.add_argument("--briefs", type=int, default=None, help="get_brief calls (100)")
    p.add_argument("--guards", type=int, default=None, help="compact_guard calls (100)")
    p.add_argument("--cold-starts", type=int, default=None, help="spawns to time (5)")
    p.add_argument("--window", type=int, default=1000,
                   help="calls in the first/last latency windows (default 1000, capped at "
                        "a fifth of the run)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--time-budget", type=float, default=540.0,
                   help="seconds; the largest sequential run is skipped if it would not fit")
    p.add_argument("--quick", action="store_true",
                   help="smoke test: 500 turns in sessions of 100, 20 queries, 10 briefs, "
                        "10 guards, 3 cold starts")
    p.add_argument("--out", type=Path, default=REPO_ROOT / "bench" / "results" /
                   "ingest_query.json", help="JSON report (default bench/results/...)")
    p.add_argument("--keep", action="store_true", help="keep the temporary stores")
    args = p.parse_args(argv)
    quick = args.quick
    defaults = {"turns": [500] if quick else [2000],
                "raw_turns": 500 if quick else 20000,
                "wide_queries": 10 if quick else 100,
                "load_turns": 50 if quick else 500,
                "session_turns": 100 if quick else 1000,
                "queries": 20 if quick else 200, "briefs": 10 if quick else 100,
                "guards": 10 if quick else 100, "cold_starts": 3 if quick else 5}
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if quick:
        args.window = min(args.window, 100)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with bytecode_caches():  # spawns as an installed package's: the first writes them
        report = anyio.run(run_all, args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
    render(report)
    print(f"- JSON report: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
