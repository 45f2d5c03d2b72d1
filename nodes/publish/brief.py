"""Node: claim the batch's turns for a new brief, atomically; note whether to go again."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from nodes.context import State, Writes
from store.briefs import BriefDraft, ClaimLost, claim_brief
from store.exchanges import count_live

__all__ = ["MAX_ROUNDS", "claimed_brief"]

MAX_ROUNDS = 64  # one compression run never loops longer than this


def claimed_brief(state: State, cfg: Mapping[str, Any]) -> Writes:
    batch, draft = state.get("batch"), state.get("draft")
    rounds = (state.get("rounds") or 0) + 1
    if not batch or draft is None:
        return {"rounds": rounds, "again": False}
    session_row = state.get("session_row")
    new = BriefDraft(
        session_id=session_row,
        tier=draft["tier"],
        body=draft["body"],
        created_at=time.time(),
        sources=tuple((t["id"], bytes.fromhex(t["hash"])) for t in batch),
    )
    limit = state.ctx.settings.turn_limit
    made: list[dict[str, Any]] = []
    try:
        with state.ctx.store.write() as conn:
            brief_id = claim_brief(conn, new)
            more = count_live(conn, session_row) >= limit
        made.append({"id": brief_id, "tier": draft["tier"], "turns": len(batch)})
    except ClaimLost:
        more = True  # someone else compressed; look again at what is left
    return {"briefs": made, "rounds": rounds, "again": more and rounds < MAX_ROUNDS}
