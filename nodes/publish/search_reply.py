"""Node: the text of a search reply, every hit citing its provenance."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodes.context import State, Writes
from nodes.publish.budget import Budget

__all__ = ["search_reply"]


def search_reply(state: State, cfg: Mapping[str, Any]) -> Writes:
    query, hits = state.get("query"), state.get("hits") or []
    req = state.get("request") or {}
    scope = "all sessions" if req.get("cross_session") else f"session {req.get('session_id')!r}"
    budget = Budget(state.ctx.settings.max_chars)
    budget.add(f"Found {len(hits)} of {state.get('total') or 0} hits for {query['text']!r} "
               f"({query['mode']}; {scope})")
    for note in state.get("notes") or []:
        budget.add(f"Note: {note}")
    if query["unknown_session"]:
        budget.add("Note: no turns have been recorded in this session.")
    for h in hits:
        where = f" brief {h['brief_id']}" if h["brief_id"] is not None else ""
        trace = f" trace:{h['trace_id']}" if h.get("trace_id") else ""
        flags = f" ⚠ NAFE:{','.join(h['flags'])}" if h.get("flags") else ""
        budget.add(f"#{h['exchange_id']} [{h['role']}] {h['session_id']} {h['created_at']}"
                   f" score {h['score']:.4f}{where}{trace}{flags}")
        budget.add(f"  {h['snippet']}")
        for d in h["decisions"][:3]:
            budget.add(f"  decision: {d}")
        for b in h["blockers"][:3]:
            budget.add(f"  blocker: {b}")
    if state.get("next_cursor"):
        budget.add("More hits: pass next_cursor as cursor.")
    return {"text": budget.text()}
