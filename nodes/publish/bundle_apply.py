"""Node: apply a verified bundle's turns to the store, idempotently.

A turn is skipped when its origin is known here (stored, received before, or forgotten
here) or its source key is stored. A tombstone of a turn never held here is stored as a
tombstone (store.sync.record_tombstone), so the chain runs through it as at the sender
and the turn cannot arrive later from another peer. Every other turn is stored the
way an ingest stores it — decisions and blockers, vector and keyword fields computed
here with this store's patterns — and linked to the receiving session's head
(store.sync explains the rule).
Turns go in transactions of ``BATCH``: a crash part-way leaves whole batches, and
applying the bundle again completes it without storing anything twice.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, TypedDict

from nodes.bundles import records
from nodes.context import Cfg, RunContext, node
from nodes.evaluate_contracts.sync_input import max_record_bytes
from nodes.extract.signals import blockers, decisions
from nodes.extract.terms import context_terms
from nodes.extract.vectors import quantize, text_vector
from store.exchanges import NewTurn, record_turn
from store.neighbours import NEIGHBOUR_CHARS, previous_contents
from store.search import dated_terms
from store.sync import known_origin, record_origin, record_tombstone, turn_chain

__all__ = ["BATCH", "applied_bundle"]

BATCH = 500  # turns per write transaction: other writers wait at most one batch
PREVIOUS = 2  # turns before a turn that its vector and keyword context borrow from


def _new_turn(run: RunContext, rec: dict[str, Any], previous: list[str]) -> NewTurn:
    text, patterns = rec["content"], run.patterns
    vector = text_vector(text, run.settings.vector_dim, previous)
    return NewTurn(
        session=rec["session"], role=rec["role"], content=text,
        content_hash=bytes.fromhex(rec["content_hash"]),
        created_at=float(rec["created_at"]), vector=quantize(vector),
        decisions=tuple(decisions(text, patterns)), blockers=tuple(blockers(text, patterns)),
        source_key=rec.get("source_key"), trace_id=rec.get("trace_id"),
        context=context_terms(text, previous), dated=dated_terms(float(rec["created_at"])))


def _apply(run: RunContext, batch: list[dict[str, Any]], peer: str, counts: dict[str, int]
           ) -> None:
    now = time.time()
    with run.store.write() as conn:
        previous: dict[str, list[str]] = {}
        for rec in batch:
            origin = bytes.fromhex(rec["origin"])
            if rec["t"] == "gone":
                # A turn forgotten at the sender: held here, it stays (forgetting is
                # done where it is asked for); never held here, its tombstone comes in.
                if not known_origin(conn, origin):
                    record_tombstone(conn, rec["session"], bytes.fromhex(rec["content_hash"]),
                                     bytes.fromhex(rec["chain"]), origin, peer, now)
                    counts["tombstones"] += 1
                continue
            if known_origin(conn, origin):
                counts["duplicates"] += 1
                continue
            session = rec["session"]
            before = previous.get(session)
            if before is None:
                before = previous_contents(conn, session, PREVIOUS)
            recorded = record_turn(conn, _new_turn(run, rec, before))
            if recorded.duplicate:  # its source key is stored (captured on both sides)
                counts["duplicates"] += 1
                continue
            counts["applied"] += 1
            if turn_chain(conn, recorded.exchange_id).hex() != rec["origin"]:
                record_origin(conn, origin, recorded.exchange_id, peer, now)
                counts["relinked"] += 1
            previous[session] = [rec["content"][:NEIGHBOUR_CHARS], *before][:PREVIOUS]


class AppliedBundleWrites(TypedDict):
    applied: Any
    after_session: Any
    rounds: Any


@node
def applied_bundle(incoming: Any, *, run: RunContext, cfg: Cfg) -> AppliedBundleWrites:
    started = time.perf_counter()
    counts = {"applied": 0, "duplicates": 0, "relinked": 0, "tombstones": 0}
    batch: list[dict[str, Any]] = []
    size = int(cfg.get("batch", BATCH))
    for rec in records(Path(incoming["path"]), max_line=max_record_bytes(run)):
        batch.append(rec)
        if len(batch) >= size:
            _apply(run, batch, incoming["peer"], counts)
            batch = []
    if batch:
        _apply(run, batch, incoming["peer"], counts)
    return {"applied": {**counts, "seconds": round(time.perf_counter() - started, 3)},
            "after_session": 0, "rounds": 0}
