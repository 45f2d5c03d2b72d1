"""Node: store the validated turn with its signals, flags and index entries, in one
transaction; a turn that names no trace id gets its session's. A turn that comes with a
``milestone`` label (a CLAEG shutdown event) is flagged in the same transaction, so no
compression can take it as an ordinary turn in between."""

from __future__ import annotations

from typing import Any, TypedDict

from nodes.context import RunContext, node
from nodes.evaluate_contracts.inputs import new_trace_id
from store.correlation import exchange_trace, keep_session_trace, session_trace
from store.exchanges import NewTurn, record_turn
from store.milestones import mark_milestone
from store.signal_flags import StoredFlag, record_flags

__all__ = ["stored_turn"]


class StoredTurnWrites(TypedDict):
    recorded: Any
    compression_due: Any
    session_row: Any


@node
def stored_turn(turn: Any, fields: Any, flags: Any, vector: Any, decisions: Any, blockers: Any, *,
                run: RunContext) -> StoredTurnWrites:
    fields = fields or {}
    flags = [StoredFlag(0, f["signature"], f["span"], f["start"], f["end"])
             for f in flags or ()]
    with run.store.write() as conn:
        known = None if turn["trace_id"] else session_trace(conn, turn["session"])
        trace_id = turn["trace_id"] or known or new_trace_id(turn["created_at"])
        new = NewTurn(
            session=turn["session"],
            role=turn["role"],
            content=turn["content"],
            content_hash=bytes.fromhex(turn["content_hash"]),
            created_at=turn["created_at"],
            vector=bytes.fromhex(vector),
            decisions=tuple(decisions or ()),
            blockers=tuple(blockers or ()),
            source_key=turn["source_key"],
            trace_id=trace_id,
            context=fields.get("context", ""),  # the keyword index's other columns
            dated=fields.get("dated", ""),
        )
        rec = record_turn(conn, new)
        if rec.duplicate:
            trace_id = exchange_trace(conn, rec.exchange_id)
        else:
            if known is None:
                keep_session_trace(conn, rec.session_id, trace_id)
            record_flags(conn, rec.exchange_id, rec.session_id, flags)
            if turn.get("milestone"):
                mark_milestone(conn, rec.session_id, rec.exchange_id, turn["milestone"],
                               turn["created_at"])
    due = not rec.duplicate and rec.live_turns >= run.settings.turn_limit
    return {
        "recorded": {
            "exchange_id": rec.exchange_id,
            "session_row": rec.session_id,
            "duplicate": rec.duplicate,
            "live_turns": rec.live_turns,
            "trace_id": trace_id,
        },
        "compression_due": due,
        "session_row": rec.session_id,
    }
