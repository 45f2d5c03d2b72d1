"""Nodes: store validated turns with their signals, flags and index entries.

``stored_turn`` stores the one turn of an ingest in a transaction of its own;
``stored_turns`` stores a batch's turns (nodes.batch) in one transaction, each exactly
as ``stored_turn`` would (``recorded_turn``), with the batch's keyword and vector index
entries added in one statement each. A turn that names no trace id gets its session's.
A turn that comes with a ``milestone`` label (a CLAEG shutdown event) is flagged in the
same transaction, so no compression can take it as an ordinary turn in between."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict

from nodes.context import RunContext, node
from nodes.evaluate_contracts.inputs import new_trace_id
from store.correlation import exchange_trace, keep_session_trace, session_trace
from store.errors import StoreError
from store.exchanges import NewTurn, TurnIndex, count_live, record_turn, source_key_turn
from store.milestones import mark_milestone
from store.signal_flags import StoredFlag, record_flags
from store.sql import Conn

__all__ = ["recorded_turn", "stored_turn", "stored_turns"]


def recorded_turn(conn: Conn, get: Callable[[str], Any],
                  index: TurnIndex | None = None) -> dict[str, Any]:
    """Store one turn inside the caller's write: ``get(channel)`` reads its values (the
    ingest's channels, or one turn of a batch). What was recorded (its ``live_turns``
    is 0 with ``index``: store.exchanges.record_turn)."""
    turn, fields = get("turn"), get("fields") or {}
    flags = [StoredFlag(0, f["signature"], f["span"], f["start"], f["end"])
             for f in get("flags") or ()]
    known = None if turn["trace_id"] else session_trace(conn, turn["session"])
    trace_id = turn["trace_id"] or known or new_trace_id(turn["created_at"])
    new = NewTurn(
        session=turn["session"],
        role=turn["role"],
        content=turn["content"],
        content_hash=bytes.fromhex(turn["content_hash"]),
        created_at=turn["created_at"],
        vector=bytes.fromhex(get("vector")),
        decisions=tuple(get("decisions") or ()),
        blockers=tuple(get("blockers") or ()),
        source_key=turn["source_key"],
        trace_id=trace_id,
        context=fields.get("context", ""),  # the keyword index's other columns
        dated=fields.get("dated", ""),
    )
    rec = record_turn(conn, new, index)
    if rec.duplicate:
        trace_id = exchange_trace(conn, rec.exchange_id)
    else:
        if known is None:
            keep_session_trace(conn, rec.session_id, trace_id)
        record_flags(conn, rec.exchange_id, rec.session_id, flags)
        if turn.get("milestone"):
            mark_milestone(conn, rec.session_id, rec.exchange_id, turn["milestone"],
                           turn["created_at"])
    return {
        "exchange_id": rec.exchange_id,
        "session_row": rec.session_id,
        "duplicate": rec.duplicate,
        "live_turns": rec.live_turns,
        "trace_id": trace_id,
    }


def _duplicate(conn: Conn, source_key: str) -> dict[str, Any]:
    found = source_key_turn(conn, source_key)
    if found is None:  # stored and then forgotten since the batch looked
        raise StoreError(f"the turn with source_key {source_key!r} is no longer stored; "
                         "run the batch again")
    return {"exchange_id": found[0], "session_row": found[1], "duplicate": True,
            "live_turns": 0, "trace_id": exchange_trace(conn, found[0])}


class StoredTurnWrites(TypedDict):
    recorded: Any
    compression_due: Any
    session_row: Any


@node
def stored_turn(turn: Any, fields: Any, flags: Any, vector: Any, decisions: Any,
                blockers: Any, *, run: RunContext) -> StoredTurnWrites:
    values = {"turn": turn, "fields": fields, "flags": flags, "vector": vector,
              "decisions": decisions, "blockers": blockers}
    with run.store.write() as conn:
        recorded = recorded_turn(conn, values.get)
    due = not recorded["duplicate"] and recorded["live_turns"] >= run.settings.turn_limit
    return {"recorded": recorded, "compression_due": due,
            "session_row": recorded["session_row"]}


class StoredTurnsWrites(TypedDict):
    items: Any
    due: Any


@node
def stored_turns(items: Any, *, run: RunContext) -> StoredTurnsWrites:
    """The batch's turns that passed validation, in order, in one write; each item gets
    ``recorded``. ``due``: the session rows left holding a full batch of uncompressed
    turns (compressed after the batch, nodes.publish.brief.compressed_sessions)."""
    limit = run.settings.turn_limit
    sessions: dict[int, None] = {}
    index = TurnIndex()
    with run.store.write() as conn:
        for item in items:
            if item.get("rejected") is not None:
                continue
            if item.get("duplicate"):  # its source key is stored (nodes.batch)
                item["recorded"] = _duplicate(conn, item["turn"]["source_key"])
                continue
            item["recorded"] = recorded = recorded_turn(conn, item.get, index)
            if not recorded["duplicate"]:
                sessions[recorded["session_row"]] = None
        index.add_to(conn)
        due = [s for s in sessions if count_live(conn, s) >= limit]
    return {"items": items, "due": due}
