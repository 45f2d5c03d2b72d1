"""Node: flag a turn as a milestone."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from nodes.context import State, Writes
from store.milestones import mark_milestone

__all__ = ["marked_milestone"]


def marked_milestone(state: State, cfg: Mapping[str, Any]) -> Writes:
    m = state.get("milestone")
    with state.ctx.store.write() as conn:
        brief_id = mark_milestone(conn, m["session_row"], m["exchange_id"], m["label"],
                                  time.time())
    note = "" if brief_id is None else f" (already in brief {brief_id})"
    return {"reply": {
        "text": f"Milestone #{m['exchange_id']} marked: {m['label']}{note}",
        "exchange_id": m["exchange_id"], "session_id": m["session"], "label": m["label"],
        "brief_id": brief_id,
    }}
