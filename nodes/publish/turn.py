"""Node: store the validated turn with its signals and index entries, in one transaction."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodes.context import State, Writes
from store.exchanges import NewTurn, record_turn

__all__ = ["stored_turn"]


def stored_turn(state: State, cfg: Mapping[str, Any]) -> Writes:
    turn, fields = state.get("turn"), state.get("fields") or {}
    new = NewTurn(
        session=turn["session"],
        role=turn["role"],
        content=turn["content"],
        content_hash=bytes.fromhex(turn["content_hash"]),
        created_at=turn["created_at"],
        vector=bytes.fromhex(state.get("vector")),
        decisions=tuple(state.get("decisions") or ()),
        blockers=tuple(state.get("blockers") or ()),
        source_key=turn["source_key"],
        trace_id=turn["trace_id"],
        context=fields.get("context", ""),  # the keyword index's other columns
        dated=fields.get("dated", ""),
    )
    with state.ctx.store.write() as conn:
        rec = record_turn(conn, new)
    due = not rec.duplicate and rec.live_turns >= state.ctx.settings.turn_limit
    return {
        "recorded": {
            "exchange_id": rec.exchange_id,
            "session_row": rec.session_id,
            "duplicate": rec.duplicate,
            "live_turns": rec.live_turns,
        },
        "compression_due": due,
        "session_row": rec.session_id,
    }
