"""Retrieval quality on LoCoMo-format conversations, through the real MCP server.

Run from the repository root::

    python bench/locomo.py                       # the dev split, default configuration
    python bench/locomo.py --data FILE.json --json report.json
    python bench/locomo.py --env STENO_EMBEDDINGS=ollama --env STENO_EMBEDDINGS_MODEL=...
    python bench/locomo.py --postgres            # on a throwaway PostgreSQL server
    python bench/locomo.py --database-url postgresql://...   # an empty database

Each conversation of the file is ingested into a session of its own through a fresh
server process (``python -m stenographer`` over stdio, driven by the MCP SDK client,
``OMEGA_STENOGRAPHER_DIR`` a new temporary directory, ``STENO_DATABASE_URL`` the
database on PostgreSQL; ``--postgres`` starts one with ``tests.pg_server``): speaker A
as ``user``, speaker B as ``assistant``, content ``"<speaker>: <text>"`` plus
``" [image: <caption>]"`` when the turn shared an image, the session's date as
``created_at``. The exchange id of
every dialog id (``D<session>:<turn>``) comes from the ingest reply's structured
``exchange_id``.

Every question of categories 1-4 (5, adversarial, has no evidence to find) is then
asked through ``stenographer_query_history`` (session-scoped, ``--limit`` hits), and
its evidence turns are looked up in the ranking:

* evidence recall@k: the share of a question's evidence turns in the top k, averaged
  over questions; hit@k: the share of questions with at least one in the top k;
  MRR: the mean reciprocal rank of the first evidence turn (0 when not ranked);
* per category, questions with no result at all, search latency (client round trip
  and the server's graph time), and ingest throughput of the same run;
* brief level: ``stenographer_compact_guard`` with the question as query; a question's
  evidence briefs are the briefs that hold its evidence turns (read from the store
  after the run); brief recall@k is the share of those briefs among the top k returned.

Questions without evidence, and evidence ids that name no turn, are counted and left
out. Nothing here knows the data beyond the file format.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import re
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))
DEFAULT_DATA = REPO_ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"

from mcp.client import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

__all__ = [
    "CATEGORY_NAMES",
    "Conversation",
    "Question",
    "Turn",
    "evidence_ids",
    "load_conversations",
    "main",
    "parse_locomo_date",
    "question_scores",
    "run_benchmark",
    "summarize_scores",
    "turn_content",
]

KS = (1, 5, 10, 20)
GUARD_KS = (1, 5)
CATEGORIES = (1, 2, 3, 4)
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
INGEST = "stenographer_ingest_exchange"
SEARCH = "stenographer_query_history"
GUARD = "stenographer_compact_guard"
CALL_TIMEOUT_S = 120.0

_SESSION_KEY = re.compile(r"session_(\d+)")
_DIALOG_ID = re.compile(r"D\d+:\d+")
_DATE = re.compile(
    r"\s*(\d{1,2}):(\d{2})\s*([ap])\.?\s*m\.?\s+on\s+(\d{1,2})\s+([A-Za-z]+)\.?,?\s+(\d{4})\s*",
    re.IGNORECASE,
)
_MONTHS = {m: n for n, m in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"),
    start=1)}


# --------------------------------------------------------------------------- the file


@dataclass(frozen=True)
class Turn:
    dialog_id: str
    role: str
    content: str
    created_at: str | None


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]


def parse_locomo_date(text: str) -> str | None:
    """``"1:56 pm on 8 May, 2023"`` -> ``"2023-05-08T13:56:00Z"``; None if not that form."""
    m = _DATE.fullmatch(text or "")
    if m is None:
        return None
    hour, minute, half, day, month_name, year = m.groups()
    month = _MONTHS.get(month_name[:3].lower())
    if month is None or not 1 <= int(hour) <= 12 or int(minute) > 59:
        return None
    h = int(hour) % 12 + (12 if half.lower() == "p" else 0)
    try:
        moment = datetime(int(year), month, int(day), h, int(minute), tzinfo=UTC)
    except ValueError:
        return None
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def turn_content(turn: Mapping[str, Any]) -> str:
    """What is ingested for a dialog turn: speaker, text, and the shared image's caption."""
    content = f"{turn.get('speaker', '')}: {turn.get('text', '')}"
    caption = turn.get("blip_caption")
    if caption:
        content += f" [image: {caption}]"
    return content


def evidence_ids(raw: Iterable[Any]) -> tuple[str, ...]:
    """Dialog ids of an evidence list (entries such as ``"D8:6; D9:17"`` hold several)."""
    found: list[str] = []
    for entry in raw:
        found += _DIALOG_ID.findall(str(entry))
    return tuple(dict.fromkeys(found))


def load_conversations(path: Path) -> list[Conversation]:
    samples = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for n, sample in enumerate(samples):
        conv = sample["conversation"]
        speaker_a = conv.get("speaker_a")
        numbers = sorted(int(m.group(1)) for k in conv if (m := _SESSION_KEY.fullmatch(k)))
        turns = []
        for number in numbers:
            created = parse_locomo_date(str(conv.get(f"session_{number}_date_time", "")))
            for t in conv[f"session_{number}"]:
                role = "user" if t.get("speaker") == speaker_a else "assistant"
                turns.append(Turn(str(t["dia_id"]), role, turn_content(t), created))
        questions = tuple(
            Question(str(q["question"]), int(q["category"]), evidence_ids(q.get("evidence", [])))
            for q in sample.get("qa", [])
            if int(q.get("category", 0)) in CATEGORIES
        )
        out.append(Conversation(str(sample.get("sample_id", f"sample-{n}")), tuple(turns),
                                questions))
    return out


# --------------------------------------------------------------------------- scoring


def question_scores(ranked: Sequence[int], evidence: Sequence[int],
                    ks: Sequence[int] = KS) -> dict[str, float]:
    """recall@k, hit@k and reciprocal rank of one ranking against its evidence ids."""
    wanted = set(evidence)
    out: dict[str, float] = {}
    for k in ks:
        found = len(wanted.intersection(ranked[:k]))
        out[f"recall@{k}"] = found / len(wanted)
        out[f"hit@{k}"] = 1.0 if found else 0.0
    first = next((n for n, i in enumerate(ranked, start=1) if i in wanted), None)
    out["mrr"] = 1.0 / first if first else 0.0
    return out


def summarize_scores(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Means of each score over questions (plus their count)."""
    if not rows:
        return {"questions": 0}
    keys = list(rows[0])
    out: dict[str, float] = {"questions": len(rows)}
    out.update({k: round(sum(r[k] for r in rows) / len(rows), 4) for k in keys})
    return out


def percentile(values: Sequence[float], p: float) -> float:
    if not values:
        return math.nan
    xs = sorted(values)
    rank = (len(xs) - 1) * p / 100.0
    lo = math.floor(rank)
    hi = min(lo + 1, len(xs) - 1)
    return float(xs[lo] + (xs[hi] - xs[lo]) * (rank - lo))


# --------------------------------------------------------------------------- the run


def server_params(data_dir: Path, env: Mapping[str, str]) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "stenographer"], cwd=str(REPO_ROOT),
        env={"OMEGA_STENOGRAPHER_DIR": str(data_dir), "PYTHONPATH": str(REPO_ROOT), **env})


def _structured(result: Any, what: str) -> dict[str, Any]:
    if getattr(result, "is_error", False):
        text = "".join(getattr(c, "text", "") for c in result.content or [])
        raise RuntimeError(f"{what} failed: {text[:300]}")
    value = getattr(result, "structured_content", None)
    if not isinstance(value, dict):
        raise RuntimeError(f"{what} returned no structured content")
    return value


@dataclass
class _Run:
    ingest_s: float = 0.0
    ingest_turns: int = 0
    ingest_server_ms: list[float] = field(default_factory=list)
    search_ms: list[float] = field(default_factory=list)
    search_server_ms: list[float] = field(default_factory=list)
    guard_ms: list[float] = field(default_factory=list)
    exchange_of: dict[tuple[str, str], int] = field(default_factory=dict)
    rankings: list[tuple[Conversation, Question, list[int]]] = field(default_factory=list)
    guard_rankings: list[tuple[Conversation, Question, list[int]]] = field(
        default_factory=list)


async def _ingest(client: Client, conv: Conversation, run: _Run) -> None:
    started = time.perf_counter()
    for turn in conv.turns:
        args: dict[str, Any] = {"role": turn.role, "content": turn.content,
                                "session_id": conv.sample_id}
        if turn.created_at is not None:
            args["created_at"] = turn.created_at
        out = _structured(await client.call_tool(INGEST, args), f"ingest {turn.dialog_id}")
        run.exchange_of[(conv.sample_id, turn.dialog_id)] = int(out["exchange_id"])
        run.ingest_server_ms.append(float(out["trace"]["duration_ms"]))
    run.ingest_s += time.perf_counter() - started
    run.ingest_turns += len(conv.turns)


async def _ask(client: Client, conv: Conversation, run: _Run, limit: int, mode: str,
               guard: bool) -> None:
    for q in conv.questions:
        started = time.perf_counter()
        out = _structured(await client.call_tool(SEARCH, {
            "query": q.text, "session_id": conv.sample_id, "limit": limit, "mode": mode}),
            f"search {q.text!r}")
        run.search_ms.append((time.perf_counter() - started) * 1e3)
        run.search_server_ms.append(float(out["trace"]["duration_ms"]))
        run.rankings.append((conv, q, [int(h["exchange_id"]) for h in out["hits"]]))
        if guard:
            started = time.perf_counter()
            g = _structured(await client.call_tool(GUARD, {
                "session_id": conv.sample_id, "query": q.text, "top_k": max(GUARD_KS)}),
                f"guard {q.text!r}")
            run.guard_ms.append((time.perf_counter() - started) * 1e3)
            run.guard_rankings.append((conv, q, [int(b) for b in g["brief_ids"]]))


SELECT_BRIEF_OF = "SELECT id, brief_id FROM exchanges WHERE brief_id IS NOT NULL"


def _brief_of(db_path: Path, database_url: str | None) -> dict[int, int]:
    """exchange id -> brief id, read from the store after the server stopped."""
    if database_url:
        import psycopg

        with psycopg.connect(database_url) as pg:
            return {int(i): int(b) for i, b in pg.execute(SELECT_BRIEF_OF)}
    import apsw

    conn = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return {int(i): int(b) for i, b in conn.execute(SELECT_BRIEF_OF)}
    finally:
        conn.close()


def _store_bytes(data_dir: Path, database_url: str | None) -> int:
    if database_url:
        import psycopg

        with psycopg.connect(database_url) as pg:
            row = pg.execute("SELECT pg_database_size(current_database())").fetchone()
            return int(row[0]) if row else 0
    return sum(p.stat().st_size for p in data_dir.glob("steno.db*"))


def _scored(run: _Run, rankings: Sequence[tuple[Conversation, Question, list[int]]],
            ks: Sequence[int], to_target: Mapping[int, int] | None = None
            ) -> tuple[dict[str, Any], dict[str, int]]:
    per_cat: dict[int, list[dict[str, float]]] = {c: [] for c in CATEGORIES}
    counts = {"no_evidence": 0, "unknown_evidence_ids": 0, "no_result": 0,
              "evidence_not_compressed": 0}
    for conv, q, ranked in rankings:
        ids = []
        for dialog_id in q.evidence:
            exchange = run.exchange_of.get((conv.sample_id, dialog_id))
            if exchange is None:
                counts["unknown_evidence_ids"] += 1
            else:
                ids.append(exchange)
        if to_target is not None:  # brief level: the briefs that hold the evidence
            targets = [to_target[i] for i in ids if i in to_target]
            counts["evidence_not_compressed"] += len(ids) - len(targets)
            ids = list(dict.fromkeys(targets))
        if not ids:
            counts["no_evidence"] += 1
            continue
        if not ranked:
            counts["no_result"] += 1
        per_cat[q.category].append(question_scores(ranked, ids, ks))
    everything = [row for rows in per_cat.values() for row in rows]
    scores: dict[str, Any] = {"overall": summarize_scores(everything)}
    for cat, rows in per_cat.items():
        scores[f"{cat} {CATEGORY_NAMES[cat]}"] = summarize_scores(rows)
    return scores, counts


async def run_benchmark(data: Path, *, limit: int = 20, mode: str = "hybrid",
                        guard: bool = True, env: Mapping[str, str] | None = None,
                        work_dir: Path | None = None, database_url: str | None = None
                        ) -> dict[str, Any]:
    """Ingest, ask, score; return the report (see the module docstring).
    ``database_url``: an empty PostgreSQL database to use instead of the SQLite file."""
    conversations = load_conversations(data)
    run = _Run()
    env = {**(env or {}), **({"STENO_DATABASE_URL": database_url} if database_url else {})}
    with tempfile.TemporaryDirectory(prefix="locomo-", dir=work_dir) as tmp:
        data_dir = Path(tmp) / "store"
        with (Path(tmp) / "server-stderr.log").open("w", encoding="utf-8") as errlog:
            transport = stdio_client(server_params(data_dir, env), errlog=errlog)
            async with Client(transport, read_timeout_seconds=CALL_TIMEOUT_S) as client:
                for conv in conversations:
                    await _ingest(client, conv, run)
                for conv in conversations:
                    await _ask(client, conv, run, limit, mode, guard)
        brief_of = _brief_of(data_dir / "steno.db", database_url) if guard else {}
        store_bytes = _store_bytes(data_dir, database_url)
    retrieval, counts = _scored(run, run.rankings, KS)
    report: dict[str, Any] = {
        "data": str(data),
        "conversations": len(conversations),
        "turns": run.ingest_turns,
        "questions": len(run.rankings),
        "mode": mode,
        "limit": limit,
        "backend": "postgresql" if database_url else "sqlite",
        "env": {k: v for k, v in env.items() if k != "STENO_DATABASE_URL"},
        "retrieval": retrieval,
        "counts": counts,
        "search_latency_ms": {
            "client_p50": round(percentile(run.search_ms, 50), 2),
            "client_p95": round(percentile(run.search_ms, 95), 2),
            "server_p50": round(percentile(run.search_server_ms, 50), 2),
            "server_p95": round(percentile(run.search_server_ms, 95), 2),
        },
        "ingest": {
            "turns_per_s": round(run.ingest_turns / run.ingest_s, 1) if run.ingest_s else None,
            "client_ms_per_turn": round(run.ingest_s * 1e3 / max(run.ingest_turns, 1), 3),
            "server_p50_ms": round(percentile(run.ingest_server_ms, 50), 3),
            "server_p95_ms": round(percentile(run.ingest_server_ms, 95), 3),
        },
        "store_bytes": store_bytes,
    }
    if guard:
        briefs, brief_counts = _scored(run, run.guard_rankings, GUARD_KS, brief_of)
        report["guard"] = {"briefs": briefs, "counts": brief_counts,
                           "client_p50_ms": round(percentile(run.guard_ms, 50), 2)}
    return report


# --------------------------------------------------------------------------- output


def _table(title: str, scores: Mapping[str, Mapping[str, float]], ks: Sequence[int]) -> str:
    cols = ["questions", *(f"recall@{k}" for k in ks), *(f"hit@{k}" for k in ks), "mrr"]
    lines = [title, f"{'':<18}" + "".join(f"{c:>10}" for c in cols)]
    for name, row in scores.items():
        cells = [row.get(c) for c in cols]
        lines.append(f"{name:<18}" + "".join(
            f"{'-':>10}" if v is None else f"{v:>10.0f}" if c == "questions" else f"{v:>10.3f}"
            for c, v in zip(cols, cells, strict=True)))
    return "\n".join(lines)


def render(report: Mapping[str, Any]) -> str:
    lat, ing = report["search_latency_ms"], report["ingest"]
    parts = [
        f"{report['data']}: {report['conversations']} conversations, {report['turns']} turns, "
        f"{report['questions']} questions (categories 1-4), mode {report['mode']}, "
        f"limit {report['limit']}, {report.get('backend', 'sqlite')}",
        _table("evidence turns (stenographer_query_history)", report["retrieval"], KS),
        f"counts: {report['counts']}",
        f"search latency: client p50 {lat['client_p50']} ms, p95 {lat['client_p95']} ms; "
        f"server p50 {lat['server_p50']} ms, p95 {lat['server_p95']} ms",
        f"ingest: {ing['turns_per_s']} turns/s ({ing['client_ms_per_turn']} ms per call; "
        f"server p50 {ing['server_p50_ms']} ms, p95 {ing['server_p95_ms']} ms); "
        f"store {report['store_bytes']:,} bytes",
    ]
    if "guard" in report:
        g = report["guard"]
        parts += [_table("evidence briefs (stenographer_compact_guard)", g["briefs"], GUARD_KS),
                  f"counts: {g['counts']}; guard client p50 {g['client_p50_ms']} ms"]
    return "\n\n".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA,
                        help=f"a LoCoMo-format JSON file (default {DEFAULT_DATA})")
    parser.add_argument("--limit", type=int, default=20, help="hits per question (1-50)")
    parser.add_argument("--mode", default="hybrid", choices=("hybrid", "keyword", "semantic"))
    parser.add_argument("--no-guard", action="store_true", help="skip the brief-level part")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                        help="extra server environment (repeatable)")
    parser.add_argument("--json", type=Path, help="also write the report here")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--postgres", action="store_true",
                       help="run on a throwaway PostgreSQL server (tests.pg_server)")
    where.add_argument("--database-url", help="run on this empty PostgreSQL database")
    args = parser.parse_args(argv)
    env = dict(item.split("=", 1) for item in args.env)
    server = None
    database_url = args.database_url
    if args.postgres:
        from tests.pg_server import PostgresServer

        server = PostgresServer().start()
        database_url = server.database()
    try:
        report = anyio.run(functools.partial(
            run_benchmark, args.data, limit=args.limit, mode=args.mode,
            guard=not args.no_guard, env=env, database_url=database_url))
    finally:
        if server is not None:
            server.stop()
    print(render(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
