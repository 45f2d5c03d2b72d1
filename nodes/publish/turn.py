"""Nodes: store validated turns with their signals, flags and index entries.

``stored_turn`` stores the one turn of an ingest in a transaction of its own;
``stored_turns`` stores a batch's turns (nodes.batch) in one transaction, each exactly
as ``stored_turn`` would (``store.exchanges.record_turns``), with a few statements for the
whole batch. A turn that names no trace id gets its session's.
A turn that comes with a ``milestone`` label (a CLAEG shutdown event) is flagged in the
same transaction, so no compression can take it as an ordinary turn in between."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, TypedDict

from nodes.context import RunContext, node
from nodes.evaluate_contracts.inputs import new_trace_id
from store.correlation import exchange_trace
from store.db import Store
from store.errors import StoreError
from store.exchanges import NewTurn, due_sessions, record_turn, record_turns, source_key_turn
from store.keyword_index import KeywordIndex, queued_seq
from store.milestones import mark_milestone
from store.signal_flags import StoredFlag, record_batch_flags, record_flags
from store.sql import Conn

__all__ = ["recorded_turn", "stored_turn", "stored_turns"]


def _new_turn(get: Callable[[str], Any], trace_id: str | None) -> NewTurn:
    turn, fields = get("turn"), get("fields") or {}
    return NewTurn(
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


def _flags(get: Callable[[str], Any]) -> list[StoredFlag]:
    return [StoredFlag(0, f["signature"], f["span"], f["start"], f["end"])
            for f in get("flags") or ()]


def recorded_turn(conn: Conn, get: Callable[[str], Any]) -> dict[str, Any]:
    """Store one turn inside the caller's write: ``get(channel)`` reads its values (the
    ingest's channels). What was recorded."""
    turn = get("turn")
    # the turn's trace id, else its session's, else a new one that becomes the session's
    rec = record_turn(conn, _new_turn(get, turn["trace_id"]),
                      fresh_trace=partial(new_trace_id, turn["created_at"]))
    trace_id = rec.trace_id
    if rec.duplicate:
        trace_id = exchange_trace(conn, rec.exchange_id)
    else:
        record_flags(conn, rec.exchange_id, rec.session_id, _flags(get))
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
    store = run.store
    # this process's copies, when it searches: of SQLite's keyword queue (from the
    # derived index's size) and of the stored vectors
    copy = vectors = None
    if isinstance(store, Store):
        copy, vectors = store.opened_keywords(), store.opened_vectors()
    with store.write() as conn:
        recorded = recorded_turn(conn, values.get)
        new = not recorded["duplicate"]
        # ids only grow: below the derived keyword index's size nothing is queued or built
        sized = recorded["exchange_id"] >= KeywordIndex.answers_from
        seq = (queued_seq(conn, recorded["exchange_id"])
               if sized and copy is not None and new else None)
    # once committed: the copies take the turn, so the next search does not read it back
    if vectors is not None and new:
        vectors.hold(recorded["exchange_id"], recorded["session_row"], bytes.fromhex(vector))
    if copy is not None and seq is not None:
        extra = fields or {}
        copy.hold(seq, (recorded["exchange_id"], recorded["session_row"], turn["content"],
                        extra.get("context", ""), extra.get("dated", "")))
    if sized:
        from nodes.publish.keyword_index import build_when_due

        build_when_due(store, beside=True)
    due = new and recorded["live_turns"] >= run.settings.turn_limit
    return {"recorded": recorded, "compression_due": due,
            "session_row": recorded["session_row"]}


class StoredTurnsWrites(TypedDict):
    items: Any
    due: Any


@node
def stored_turns(items: Any, *, run: RunContext) -> StoredTurnsWrites:
    """The batch's turns that passed validation, in order, in one write
    (store.exchanges.record_turns: what ``recorded_turn`` would store for each, with a
    few statements for the batch); each item gets ``recorded``. ``due``: the session rows
    left holding a full batch of uncompressed turns (compressed after the batch,
    nodes.publish.brief.compressed_sessions)."""
    limit = run.settings.turn_limit
    kept = [i for i in items if i.get("rejected") is None and not i.get("duplicate")]
    turns = [_new_turn(i.get, i["turn"]["trace_id"]) for i in kept]
    with run.store.write() as conn:
        recs = record_turns(conn, turns, new_trace_id)
        flags: list[tuple[int, int, StoredFlag]] = []
        for item, rec in zip(kept, recs, strict=True):
            trace_id = exchange_trace(conn, rec.exchange_id) if rec.duplicate else rec.trace_id
            item["recorded"] = {"exchange_id": rec.exchange_id, "session_row": rec.session_id,
                                "duplicate": rec.duplicate, "live_turns": 0,
                                "trace_id": trace_id}
            if not rec.duplicate:
                flags.extend((rec.exchange_id, rec.session_id, f) for f in _flags(item.get))
        record_batch_flags(conn, flags)
        for item, rec in zip(kept, recs, strict=True):
            if not rec.duplicate and item["turn"].get("milestone"):
                mark_milestone(conn, rec.session_id, rec.exchange_id,
                               item["turn"]["milestone"], item["turn"]["created_at"])
        for item in items:  # its source key is stored (nodes.batch)
            if item.get("rejected") is None and item.get("duplicate"):
                item["recorded"] = _duplicate(conn, item["turn"]["source_key"])
        sessions = dict.fromkeys(r.session_id for r in recs if not r.duplicate)
        due = due_sessions(conn, list(sessions), limit)
    return {"items": items, "due": due}
