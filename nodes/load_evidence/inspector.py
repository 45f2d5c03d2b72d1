"""Nodes: what the inspector shows — sessions, one turn, one brief with its sources,
recent runs. Read-only; every read is bounded."""

from __future__ import annotations

from typing import Any, TypedDict

from nodes.context import Cfg, RunContext, node
from nodes.evaluate_contracts.inputs import iso
from store.briefs import Brief, briefs_by_ids
from store.errors import NotFound
from store.exchanges import Exchange, exchanges_by_ids
from store.inspector import (
    brief_source_hashes,
    count_sessions,
    list_sessions,
    recent_runs_except,
    session_neighbours,
)
from store.milestones import milestone_ids
from store.stats import store_counts

__all__ = ["BriefView", "ExchangeView", "RunsView", "brief_detail", "exchange_detail",
           "run_list", "session_list"]

SOURCE_EXCERPT_CHARS = 600


class SessionListWrites(TypedDict):
    sessions: list[dict[str, Any]]
    total: int
    counts: dict[str, Any]


@node
def session_list(listing: dict[str, Any], *, run: RunContext) -> SessionListWrites:
    with run.store.read() as conn:
        rows = list_sessions(conn, listing["limit"], listing["offset"])
        total = count_sessions(conn)
        counts = store_counts(conn)
    sessions = [{"session_id": s.name, "created_at": iso(s.created_at),
                 "last_at": iso(s.last_at), "turns": s.turns, "uncompressed": s.live,
                 "briefs": s.briefs, "milestones": s.milestones} for s in rows]
    return {"sessions": sessions, "total": total, "counts": counts}


def _brief(b: Brief) -> dict[str, Any]:
    return {"id": b.id, "session_id": b.session, "tier": b.tier,
            "created_at": iso(b.created_at), "turns": b.turns, "body": b.body,
            "source_ids": list(b.source_ids)}


def _signals(ex: Exchange) -> dict[str, Any]:
    return {"decisions": ex.decisions, "blockers": ex.blockers}


class ExchangeView(TypedDict):
    """The inspect_exchange graph's output: one turn in full."""

    exchange: dict[str, Any]


class ExchangeDetailWrites(TypedDict):
    reply: ExchangeView


@node
def exchange_detail(exchange_id: int, *, run: RunContext) -> ExchangeDetailWrites:
    """One turn in full, with its brief, milestone label and session neighbours."""
    with run.store.read() as conn:
        ex = exchanges_by_ids(conn, [exchange_id]).get(exchange_id)
        if ex is None:
            raise NotFound(f"exchange #{exchange_id} does not exist", exchange_id=exchange_id)
        previous_id, next_id = session_neighbours(conn, exchange_id)
        label = milestone_ids(conn, [exchange_id]).get(exchange_id)
        brief = briefs_by_ids(conn, [ex.brief_id]).get(ex.brief_id) if ex.brief_id else None
    return {"reply": ExchangeView(exchange={
        "id": ex.id, "session_id": ex.session, "role": ex.role,
        "created_at": iso(ex.created_at), "chars": len(ex.content), "content": ex.content,
        "content_hash": ex.content_hash.hex(), "trace_id": ex.trace_id, **_signals(ex),
        "milestone": label, "brief": None if brief is None else _brief(brief),
        "previous_id": previous_id, "next_id": next_id,
    })}


class BriefView(TypedDict):
    """The inspect_brief graph's output: one brief and its checked sources."""

    brief: dict[str, Any]


class BriefDetailWrites(TypedDict):
    reply: BriefView


@node
def brief_detail(brief_id: int, *, run: RunContext) -> BriefDetailWrites:
    """One brief with its source turns, each checked against the hash recorded for it."""
    with run.store.read() as conn:
        brief = briefs_by_ids(conn, [brief_id]).get(brief_id)
        if brief is None:
            raise NotFound(f"brief {brief_id} does not exist")
        recorded = brief_source_hashes(conn, brief_id)
        turns = exchanges_by_ids(conn, list(recorded))
    sources = []
    for exchange_id, content_hash in recorded.items():
        ex = turns.get(exchange_id)
        source: dict[str, Any] = {"id": exchange_id, "recorded_hash": content_hash.hex(),
                                  "present": ex is not None}
        if ex is not None:
            source.update(role=ex.role, created_at=iso(ex.created_at), chars=len(ex.content),
                          excerpt=ex.content[:SOURCE_EXCERPT_CHARS],
                          hash_matches=ex.content_hash == content_hash, **_signals(ex))
        sources.append(source)
    return {"reply": BriefView(brief={**_brief(brief), "sources": sources})}


class RunsView(TypedDict):
    """The inspect_runs graph's output: the newest runs, and the graphs left out."""

    runs: list[dict[str, Any]]
    hidden_graphs: list[str]


class RunListWrites(TypedDict):
    reply: RunsView


@node
def run_list(listing: dict[str, Any], *, run: RunContext, cfg: Cfg) -> RunListWrites:
    """The newest runs; by default without the read-only graphs named in ``hide``."""
    hide = () if listing["all_graphs"] else tuple(cfg.get("hide", ()))
    run.store.traces.flush()
    with run.store.read() as conn:
        runs = recent_runs_except(conn, listing["limit"], listing["graph"], hide)
    return {"reply": RunsView(runs=runs, hidden_graphs=[] if listing["graph"] else list(hide))}
