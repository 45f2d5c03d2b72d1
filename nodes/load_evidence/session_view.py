"""Nodes: what running notes and the compaction guard show of a session."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypedDict

from nodes.context import RunContext, node
from nodes.evaluate_contracts.inputs import iso
from nodes.extract.fusion import hit_match, listed_ids
from store.briefs import Brief, briefs_by_ids, session_briefs
from store.exchanges import Exchange, brief_ids, recent_turns
from store.milestones import session_milestones
from store.signal_flags import session_flags

__all__ = ["guard_evidence", "notes_evidence"]

MAX_ITEMS = 50  # of each kind; the renderer then fits them into the character budget
MAX_FLAGS = 20  # NAFE flags listed in the running notes (the newest)
TURN_CHARS = 600
BRIEF_LOOKUP = 32  # hit turns whose briefs are read at a time (best first)


def _turn(ex: Exchange) -> dict[str, Any]:
    return {"id": ex.id, "role": ex.role, "created_at": iso(ex.created_at),
            "content": ex.content[:TURN_CHARS], "chars": len(ex.content),
            "decisions": ex.decisions, "blockers": ex.blockers}


def _brief(b: Brief, score: float | None = None,
           lists: tuple[set[int], set[int]] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"id": b.id, "tier": b.tier, "created_at": iso(b.created_at),
                           "body": b.body, "source_ids": list(b.source_ids)}
    if score is not None:
        out["score"] = round(score, 8)
    if lists is not None:  # ranked for a query: why (a word of it, vectors only, ...)
        out["match"] = hit_match(b.source_ids, *lists)
    return out


class NotesEvidenceWrites(TypedDict):
    milestones: Any
    flags: Any
    briefs: Any
    live: Any


@node
def notes_evidence(session_row: Any, *, run: RunContext) -> NotesEvidenceWrites:
    row = session_row
    if row is None:
        return {"milestones": [], "flags": [], "briefs": [], "live": []}
    with run.store.read() as conn:
        milestones = session_milestones(conn, row, MAX_ITEMS)
        flags = session_flags(conn, row, MAX_FLAGS)
        briefs = session_briefs(conn, row, MAX_ITEMS)
        live = recent_turns(conn, row, MAX_ITEMS)
    return {
        "milestones": [{"exchange_id": m.exchange_id, "label": m.label, "role": m.role,
                        "excerpt": m.excerpt, "brief_id": m.brief_id} for m in milestones],
        "flags": [{"exchange_id": f.exchange_id, "signature": f.signature, "span": f.span}
                  for f in flags],
        "briefs": [_brief(b) for b in briefs],
        "live": [_turn(t) for t in live],
    }


class GuardEvidenceWrites(TypedDict):
    briefs: Any
    live: Any


@node
def guard_evidence(query: Any, keyword: Any, ranked: Any, semantic: Any = None,
                   provider: Any = None, *, run: RunContext) -> GuardEvidenceWrites:
    """Live turns, and the top-K briefs: ranked by their hit turns, or the newest."""
    row, top_k = query["session_row"], query["limit"]
    if row is None:
        return {"briefs": [], "live": []}
    lists = None if query["text"] is None else (
        listed_ids(keyword),
        listed_ids(semantic, provider))
    with run.store.read() as conn:
        live = recent_turns(conn, row, MAX_ITEMS)
        chosen: list[tuple[Brief, float | None]]
        if query["text"] is None:
            chosen = [(b, None) for b in reversed(session_briefs(conn, row, top_k))]
        else:
            chosen = _rank_briefs(conn, ranked or [], top_k)
    return {"briefs": [_brief(b, s, lists) for b, s in chosen],
            "live": [_turn(t) for t in live]}


def _rank_briefs(conn: Any, ranked: list[list[Any]], top_k: int
                 ) -> list[tuple[Brief, float | None]]:
    """A brief scores the fused score of its best source turn among the hits (ties: the
    sum of the others', then the older brief). Measured on LoCoMo-format conversations
    (bench/locomo.py): brief recall@5 0.85 with the best turn, 0.79 with the sum of all
    its turns' scores, which favours briefs with many weak matches.

    The hits' briefs are read BRIEF_LOOKUP hits at a time, best first, until the top-K
    cannot change: K briefs whose best scores differ, all above any other brief's and
    above the next unread hit's score (the sums only break ties)."""
    best: dict[int, float] = {}
    support: dict[int, float] = {}
    for lo in range(0, len(ranked), BRIEF_LOOKUP):
        part = ranked[lo:lo + BRIEF_LOOKUP]
        holders = brief_ids(conn, [i for i, _ in part])
        for exchange_id, score in part:
            brief_id = holders.get(exchange_id)
            if brief_id is None:
                continue
            if brief_id not in best:
                best[brief_id] = float(score)  # ranked is best first
            else:
                support[brief_id] = support.get(brief_id, 0.0) + float(score)
        unread = lo + BRIEF_LOOKUP
        if unread < len(ranked) and _settled(best.values(), top_k, float(ranked[unread][1])):
            break
    order = sorted(best, key=lambda b: (-best[b], -support.get(b, 0.0), b))[:top_k]
    briefs = briefs_by_ids(conn, order)
    return [(briefs[b], best[b]) for b in order if b in briefs]


def _settled(scores: Iterable[float], top_k: int, unread: float) -> bool:
    """Whether the K best of ``scores`` are distinct and above every other score and
    ``unread``: then no later hit and no tie-break can change the top-K or its order."""
    top = sorted(scores, reverse=True)[:top_k + 1]
    if not 0 < top_k <= len(top):
        return False
    head = top[:top_k]
    return (all(a > b for a, b in zip(head, head[1:], strict=False))
            and all(head[-1] > other for other in (*top[top_k:], unread)))
