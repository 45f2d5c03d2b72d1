"""Nodes: what running notes and the compaction guard show of a session."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodes.context import State, Writes
from nodes.evaluate_contracts.inputs import iso
from store.briefs import Brief, briefs_by_ids, session_briefs
from store.exchanges import Exchange, exchanges_by_ids, recent_turns
from store.milestones import session_milestones

__all__ = ["guard_evidence", "notes_evidence"]

MAX_ITEMS = 50  # of each kind; the renderer then fits them into the character budget
TURN_CHARS = 600


def _turn(ex: Exchange) -> dict[str, Any]:
    return {"id": ex.id, "role": ex.role, "created_at": iso(ex.created_at),
            "content": ex.content[:TURN_CHARS], "chars": len(ex.content),
            "decisions": ex.decisions, "blockers": ex.blockers}


def _brief(b: Brief, score: float | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"id": b.id, "tier": b.tier, "created_at": iso(b.created_at),
                           "body": b.body, "source_ids": list(b.source_ids)}
    if score is not None:
        out["score"] = round(score, 8)
    return out


def notes_evidence(state: State, cfg: Mapping[str, Any]) -> Writes:
    row = state.get("session_row")
    if row is None:
        return {"milestones": [], "briefs": [], "live": []}
    with state.ctx.store.read() as conn:
        milestones = session_milestones(conn, row, MAX_ITEMS)
        briefs = session_briefs(conn, row, MAX_ITEMS)
        live = recent_turns(conn, row, MAX_ITEMS)
    return {
        "milestones": [{"exchange_id": m.exchange_id, "label": m.label, "role": m.role,
                        "excerpt": m.excerpt, "brief_id": m.brief_id} for m in milestones],
        "briefs": [_brief(b) for b in briefs],
        "live": [_turn(t) for t in live],
    }


def guard_evidence(state: State, cfg: Mapping[str, Any]) -> Writes:
    """Live turns, and the top-K briefs: ranked by their hit turns, or the newest."""
    query = state.get("query")
    row, top_k = query["session_row"], query["limit"]
    if row is None:
        return {"briefs": [], "live": []}
    with state.ctx.store.read() as conn:
        live = recent_turns(conn, row, MAX_ITEMS)
        ranked: list[tuple[Brief, float | None]]
        if query["text"] is None:
            ranked = [(b, None) for b in reversed(session_briefs(conn, row, top_k))]
        else:
            ranked = _rank_briefs(conn, state.get("ranked") or [], top_k)
    return {"briefs": [_brief(b, s) for b, s in ranked], "live": [_turn(t) for t in live]}


def _rank_briefs(conn: Any, ranked: list[list[Any]], top_k: int
                 ) -> list[tuple[Brief, float | None]]:
    """A brief scores the sum of the fused scores of its source turns among the hits."""
    rows = exchanges_by_ids(conn, [i for i, _ in ranked])
    scores: dict[int, float] = {}
    for exchange_id, score in ranked:
        ex = rows.get(exchange_id)
        if ex is not None and ex.brief_id is not None:
            scores[ex.brief_id] = scores.get(ex.brief_id, 0.0) + score
    best = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:top_k]
    briefs = briefs_by_ids(conn, [b for b, _ in best])
    return [(briefs[b], s) for b, s in best if b in briefs]
