"""Node: flag a turn as a milestone; the brief that holds it, if any, lists it (tier A)."""

from __future__ import annotations

import time
from typing import Any, TypedDict

from nodes.context import RunContext, node
from nodes.publish.brief import rebuilt_brief
from store.briefs import briefs_by_ids
from store.milestones import mark_milestone

__all__ = ["marked_milestone"]


class MarkedMilestoneWrites(TypedDict):
    reply: Any


@node
def marked_milestone(milestone: Any, *, run: RunContext) -> MarkedMilestoneWrites:
    """Mark the turn; when it is already compressed, make its brief again as compression
    would make it now (tier A, listing the milestone with its label), in the same
    transaction."""
    m = milestone
    promoted = False
    with run.store.write() as conn:
        brief_id = mark_milestone(conn, m["session_row"], m["exchange_id"], m["label"],
                                  time.time())
        if brief_id is not None:
            before = briefs_by_ids(conn, [brief_id])[brief_id].tier
            promoted = rebuilt_brief(conn, brief_id) == "A" and before != "A"
    note = ""
    if brief_id is not None:
        note = f" (already in brief {brief_id}{', now tier A' if promoted else ''})"
    return {"reply": {
        "text": f"Milestone #{m['exchange_id']} marked: {m['label']}{note}",
        "exchange_id": m["exchange_id"], "session_id": m["session"], "label": m["label"],
        "brief_id": brief_id, "promoted": promoted,
    }}
