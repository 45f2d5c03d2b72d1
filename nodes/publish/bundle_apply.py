"""Node: apply a verified bundle's turns to the store, idempotently.

A turn is skipped when its origin is known here (stored, received before, or forgotten
here) or its source key is stored. A tombstone of a turn never held here is stored as a
tombstone (store.sync.record_tombstone), so the chain runs through it as at the sender
and the turn cannot arrive later from another peer. Every other turn is stored the
way an ingest stores it — decisions and blockers, NAFE flags, vector and keyword fields
computed here with this store's patterns, by the ingest's own node functions over a
batch (nodes.batch) — and linked to the receiving session's head (store.sync explains
the rule); its content, hashes and trace id are the sender's.
Turns go in transactions of ``BATCH``, through the batch writer an ingest's batch uses
(store.exchanges.record_turns, with the sender's trace ids: a few statements a batch): a
crash part-way leaves whole batches, and applying the bundle again completes it without
storing anything twice. ``due``: the sessions that received turns
and now hold a full batch of uncompressed ones (compressed after the import).

A batch's computation overlaps the write of the batch before it: the batch is read
against the store (which does not hold the batch before it yet) and the turns planned
before it (their origins, source keys and contents: ``_Seen``), its turns go to
the worker process (nodes.turn_worker) behind the batch before's, and this process
finishes computing the batch before (the turns the worker has not taken yet) and
writes it; the worker goes on to this batch as soon as it is done with the one before.
The writes, their order and their transactions are those of one batch after another,
so what a crash leaves is unchanged; what is computed is the same too, as long as the
batch before was stored as planned. When it was not (it held a tombstone, or a turn
became a duplicate in its write), the batch is read and computed again after that
write.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import nodes.batch as batch_module
from nodes.batch import EXTRACT, Split, split_drop, split_finish, split_start, turns_before
from nodes.bundles import records
from nodes.context import Cfg, RunContext, node
from nodes.evaluate_contracts.sync_input import max_record_bytes
from store.exchanges import NewTurn, due_sessions, record_turns, stored_source_keys
from store.signal_flags import StoredFlag, record_batch_flags
from store.sql import Conn
from store.sync import known_origin, known_origins, record_origin, record_tombstone

__all__ = ["BATCH", "applied_bundle"]

BATCH = 500  # turns per write transaction: other writers wait at most one batch


def _new_turn(rec: dict[str, Any], item: dict[str, Any]) -> NewTurn:
    return NewTurn(
        session=rec["session"], role=rec["role"], content=rec["content"],
        content_hash=bytes.fromhex(rec["content_hash"]),
        created_at=float(rec["created_at"]), vector=bytes.fromhex(item["vector"]),
        decisions=tuple(item["decisions"]), blockers=tuple(item["blockers"]),
        source_key=rec.get("source_key"), trace_id=rec.get("trace_id"),
        context=item["fields"]["context"], dated=item["fields"]["dated"])


@dataclass
class _Seen:
    """The turns planned for storing in this import's batches so far, not all stored
    yet: each session's latest contents (``turns_before``), their origins (hex) and
    source keys."""

    running: dict[str, list[str]] = field(default_factory=dict)
    origins: set[str] = field(default_factory=set)
    keys: set[str] = field(default_factory=set)


def _planned(run: RunContext, batch: list[dict[str, Any]], seen: _Seen
             ) -> list[dict[str, Any]]:
    """One item a record (nodes.batch), with the turns before each (a session's first
    from the store, unless planned earlier in ``seen``, then the batch's). A turn whose
    origin or source key is known here or in ``seen``, or came earlier in the batch, is
    a duplicate; the others join ``seen``."""
    items: list[dict[str, Any]] = []
    with run.store.read() as conn:
        keys = seen.keys | stored_source_keys(conn, [
            r["source_key"] for r in batch if r["t"] != "gone" and r.get("source_key")])
        known = known_origins(conn, [bytes.fromhex(r["origin"]) for r in batch
                                     if r["t"] != "gone"])
        for rec in batch:
            item: dict[str, Any] = {"record": rec}
            items.append(item)
            if rec["t"] == "gone":
                item["duplicate"] = True  # nothing to compute
                continue
            key = rec.get("source_key")
            if rec["origin"] in seen.origins or (key and key in keys) or bytes.fromhex(
                    rec["origin"]) in known:
                item["duplicate"] = True
                continue
            seen.origins.add(rec["origin"])
            if key:
                keys.add(key)
                seen.keys.add(key)
            item["turn"] = {"session": rec["session"], "role": rec["role"],
                            "content": rec["content"], "created_at": float(rec["created_at"])}
            item["previous"] = turns_before(conn, seen.running, item["turn"])
    return items


def _computing(run: RunContext, items: list[dict[str, Any]]) -> Split:
    """The batch's turns to store handed to the worker (from SPLIT_FROM), behind the
    batch before it when that one is still out."""
    todo = [i for i in items if not i.get("duplicate")]
    return split_start(run, todo, EXTRACT, len(todo) >= batch_module.SPLIT_FROM, queued=True)


def _write(run: RunContext, items: list[dict[str, Any]], peer: str, counts: dict[str, int],
           touched: dict[int, None]) -> bool:
    """One batch in one write: its turns through the batch writer a run at a time (a
    tombstone, which links into its session's chain where it stands, ends a run).
    True when it was stored as planned: no tombstone, every turn planned stored."""
    now = time.time()
    applied = counts["applied"]
    planned = sum(1 for i in items if not i.get("duplicate"))
    gone = False
    with run.store.write() as conn:
        turns: list[dict[str, Any]] = []
        for item in items:
            rec = item["record"]
            if rec["t"] == "gone":
                gone = True
                _stored(conn, turns, peer, now, counts, touched)
                turns = []
                # A turn forgotten at the sender: held here, it stays (forgetting is
                # done where it is asked for); never held here, its tombstone comes in.
                origin = bytes.fromhex(rec["origin"])
                if not known_origin(conn, origin):
                    record_tombstone(conn, rec["session"], bytes.fromhex(rec["content_hash"]),
                                     bytes.fromhex(rec["chain"]), origin, peer, now)
                    counts["tombstones"] += 1
            elif item.get("duplicate"):
                counts["duplicates"] += 1
            else:
                turns.append(item)
        _stored(conn, turns, peer, now, counts, touched)
    return not gone and counts["applied"] - applied == planned


def _stored(conn: Conn, items: list[dict[str, Any]], peer: str, now: float,
            counts: dict[str, int], touched: dict[int, None]) -> None:
    """Store a run of a batch's turns (store.exchanges.record_turns, with the sender's
    trace ids), their flags, and the origin of each turn whose chain hash differs here.
    A turn whose origin became known since it was read (another import) is a duplicate."""
    known = known_origins(conn, [bytes.fromhex(i["record"]["origin"]) for i in items])
    fresh = [i for i in items if bytes.fromhex(i["record"]["origin"]) not in known]
    counts["duplicates"] += len(items) - len(fresh)
    if not fresh:
        return
    recs = record_turns(conn, [_new_turn(i["record"], i) for i in fresh], None)
    flags: list[tuple[int, int, StoredFlag]] = []
    for item, recorded in zip(fresh, recs, strict=True):
        if recorded.duplicate:  # its source key is stored (captured on both sides)
            counts["duplicates"] += 1
            continue
        counts["applied"] += 1
        touched[recorded.session_id] = None
        flags.extend((recorded.exchange_id, recorded.session_id,
                      StoredFlag(0, f["signature"], f["span"], f["start"], f["end"]))
                     for f in item["flags"])
        if recorded.chain is None or recorded.chain.hex() != item["record"]["origin"]:
            record_origin(conn, bytes.fromhex(item["record"]["origin"]), recorded.exchange_id,
                          peer, now)
            counts["relinked"] += 1
    record_batch_flags(conn, flags)


def _batches(recs: Iterator[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    for rec in recs:
        batch.append(rec)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


class AppliedBundleWrites(TypedDict):
    applied: Any
    after_session: Any
    rounds: Any
    due: Any


@node
def applied_bundle(incoming: Any, *, run: RunContext, cfg: Cfg) -> AppliedBundleWrites:
    started = time.perf_counter()
    counts = {"applied": 0, "duplicates": 0, "relinked": 0, "tombstones": 0}
    touched: dict[int, None] = {}  # session rows that received turns, in order
    size = int(cfg.get("batch", BATCH))
    seen = _Seen()
    pending: list[dict[str, Any]] | None = None  # planned, its computation and write to do
    out: list[Split] = []  # handed to the worker and not finished, oldest first
    try:
        for batch in _batches(records(Path(incoming["path"]),
                                      max_line=max_record_bytes(run)), size):
            items = _planned(run, batch, seen)
            out.append(_computing(run, items))  # taken up once the worker is done with pending
            if pending is not None:
                split_finish(run, out.pop(0))
                if not _write(run, pending, incoming["peer"], counts, touched):
                    split_drop(run, out.pop())  # read and compute it again against the store
                    seen = _Seen()
                    items = _planned(run, batch, seen)
                    out.append(_computing(run, items))
            pending = items
        if pending is not None:
            split_finish(run, out.pop())
            _write(run, pending, incoming["peer"], counts, touched)
    except BaseException:
        for split in out:
            split_drop(run, split)
        raise
    limit = run.settings.turn_limit
    with run.store.read() as conn:
        due = due_sessions(conn, list(touched), limit)
    return {"applied": {**counts, "seconds": round(time.perf_counter() - started, 3)},
            "after_session": 0, "rounds": 0, "due": due}
