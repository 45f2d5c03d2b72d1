"""Nodes: many turns ingested as one batch, through the ingest's own node functions.

A batch is the channel ``items``: one dict per turn, holding that turn's values under
the ingest graph's channel names (``request``, ``turn``, ``redacted``, ``previous``,
``decisions``, ``blockers``, ``flags``, ``vector``, ``fields``, then ``recorded``).
``per_turn`` runs one of the ingest's per-turn node functions (``cfg["node"]``, or a list
of them in turn) on each turn of the batch, with the turn's values as its state: one
stage a batch, the same code and the same results as one ingest a turn. A turn the
validation refuses gets ``rejected`` (the reason) and is stepped over; a turn whose
source key is already stored (or earlier in the batch) gets ``duplicate`` and is not
computed again.

The CLAEG shutdown events on the coordination bus of each session of the batch become
system turns before the session's first turn (``batch_shutdowns``), acknowledged once
stored (``batch_receipts``), as an ingest records them. What depends on the turns
stored before a turn is read once per batch:
``batch_previous`` gives each turn the two turns before it in its session — the
store's for a session's first turn in the batch, then the batch's own, as a single
ingest would read them once the turns before it were stored. The batch is then stored
in one transaction (nodes.publish.turn.stored_turns), its queued keyword entries are
moved into the derived keyword index once the queue is long and PostgreSQL's planner
statistics are taken again once the store has outgrown them (``batch_upkeep``), and
it is compressed after it (nodes.publish.brief.compressed_sessions).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from nodes.context import Cfg, NodeFn, NoWrites, Reads, RunContext, call, node
from nodes.evaluate_contracts.inputs import iso
from nodes.evaluate_contracts.turn_input import checked_turn
from nodes.extract.brief import brief_draft
from nodes.extract.redaction import redacted_turn
from nodes.extract.search_fields import keyword_columns, search_fields
from nodes.extract.turn_flags import nafe_flags
from nodes.extract.turn_signals import turn_signals
from nodes.extract.vectors import turn_vector
from nodes.load_evidence.bus_events import shutdown_turn, unacknowledged
from nodes.load_evidence.neighbours import PREVIOUS_TURNS
from nodes.publish.wording import counted
from nodes.turn_worker import chained, reads
from store.errors import InvalidInput
from store.exchanges import stored_source_keys
from store.neighbours import NEIGHBOUR_CHARS, previous_contents
from store.sql import Conn

__all__ = ["BRIEFS_SPLIT_FROM", "EXTRACT", "OFFLOADED", "PER_TURN", "SPLIT_FROM", "batch_items",
           "batch_previous", "batch_receipts", "batch_reply", "batch_shutdowns",
           "batch_upkeep", "each_split", "each_turn", "per_turn", "previous_after",
           "split_drop", "split_finish", "split_start", "turns_before"]

# The ingest's node functions that read and write one turn's channels only.
PER_TURN: dict[str, NodeFn] = {fn.__name__: fn for fn in (
    checked_turn, redacted_turn, turn_signals, nafe_flags, turn_vector, search_fields)}
MAX_BATCH_TURNS = 100_000
# Those that read no store, most of whose turns in a large batch the worker process
# runs (nodes.turn_worker): from SPLIT_FROM turns a stage, where sending them costs less
# than it saves (a few microseconds a turn against tens).
OFFLOADED: dict[str, NodeFn] = {fn.__name__: fn for fn in (
    redacted_turn, turn_signals, nafe_flags, turn_vector, search_fields, keyword_columns,
    brief_draft)}
SPLIT_FROM = 256
# The per-turn node functions after the turns before each are read, in turn: a batch
# sends them to the worker in one request (the turn and the turns before it sent once,
# one wait for its answer).
EXTRACT = ("turn_signals", "nafe_flags", "turn_vector", "search_fields")
# A brief's text (nodes.extract.brief) costs this process tens of times what one turn's
# stage does, and its few source turns cost little to send: the worker takes its part
# of a compression from this many briefs (nodes.publish.brief.compressed_sessions).
BRIEFS_SPLIT_FROM = 8


class BatchItemsWrites(TypedDict):
    items: Any


@node
def batch_items(request: Any) -> BatchItemsWrites:
    """The batch of an ``ingest_batch`` request: ``{"turns": [<ingest request>, ...]}``."""
    request = request or {}
    turns = request.get("turns")
    if not isinstance(turns, list) or not all(isinstance(t, dict) for t in turns):
        raise InvalidInput("turns must be a list of ingest requests (objects with "
                           "session_id, role, content...)")
    if len(turns) > MAX_BATCH_TURNS:
        raise InvalidInput(f"turns holds {counted(len(turns), 'request')}; at most "
                           f"{MAX_BATCH_TURNS:,} a batch")
    return {"items": [{"request": t} for t in turns]}


class PerTurnWrites(TypedDict):
    items: Any


@node
def per_turn(items: Any, *, run: RunContext, cfg: Cfg) -> PerTurnWrites:
    """``cfg["node"]`` on every turn of the batch still to be stored (a list of names:
    those node functions in turn on each, ``EXTRACT``); the validation (``checked_turn``)
    records a refusal instead of failing the batch."""
    each_turn(run, items, cfg["node"], cfg)
    return {"items": items}


def each_turn(run: RunContext, items: list[dict[str, Any]], name: str | Sequence[str],
              cfg: Mapping[str, Any] | None = None) -> None:
    """Run the per-turn node function ``name`` (or the functions a sequence of names
    names, in turn) on each item still to be stored, the item's values as its channels,
    adding what it writes to the item. From SPLIT_FROM turns, functions that read no
    store (``OFFLOADED``) are run by the run's worker process (nodes.turn_worker) from
    the first turn and by this one from the last, until the two meet."""
    names = (name,) if isinstance(name, str) else tuple(name)
    todo = [i for i in items if i.get("rejected") is None and not i.get("duplicate")]
    if names == ("checked_turn",):
        fn = PER_TURN["checked_turn"]
        for item in todo:
            try:
                item.update(call(fn, item, run, cfg))
            except InvalidInput as ex:
                item["rejected"] = str(ex)
        return
    each_split(run, todo, names, cfg)  # every other per-turn function reads no store


def each_split(run: RunContext, items: list[dict[str, Any]], names: tuple[str, ...],
               cfg: Mapping[str, Any] | None = None) -> None:
    """Run the node functions ``OFFLOADED[name]`` of ``names`` (they read no store) in
    turn on each item, the item's values as their channels, adding what they write to
    the item: from SPLIT_FROM items (BRIEFS_SPLIT_FROM briefs), the run's worker process
    takes them from the first (one request for all of ``names``) while this one takes
    them from the last."""
    split_from = BRIEFS_SPLIT_FROM if names == ("brief_draft",) else SPLIT_FROM
    split_finish(run, split_start(run, items, names, len(items) >= split_from, cfg))


@dataclass
class Split:
    """Items being computed: by the worker process from the first while ``ticket`` is
    its request's (None once its answer is taken), the rest by this one once
    ``split_finish`` is called."""

    names: tuple[str, ...]
    cfg: Mapping[str, Any] | None
    items: list[dict[str, Any]]
    ticket: int | None


def split_start(run: RunContext, items: list[dict[str, Any]], names: tuple[str, ...],
                offload: bool, cfg: Mapping[str, Any] | None = None, *,
                queued: bool = False) -> Split:
    """Hand ``items`` (when ``offload``) to the run's worker process, which runs the node
    functions ``names`` (of ``OFFLOADED``: they read no store) in turn on each from the
    first, and return at once: ``split_finish``, which must follow (the worker answers
    its requests in order), computes them here from the last until the two meet. A
    request sent before this process's other work leaves it less to do here;
    ``queued``: behind this thread's request in hand (``TurnWorker.send``)."""
    worker = run.turn_worker
    ticket = worker.send(run, names if len(names) > 1 else names[0], cfg,
                         reads(items, _chain_reads(names)), queued=queued) \
        if offload and items and worker is not None else None
    return Split(names, cfg, items, ticket)


def split_finish(run: RunContext, split: Split) -> None:
    """Compute the items of ``split`` the worker has not taken, from the last, then add
    the worker's writes to its items (the items it did not answer for, computed here:
    all of them when it failed)."""
    fns = [OFFLOADED[n] for n in split.names]
    items, ticket = split.items, split.ticket
    if ticket is None:
        for item in items:
            item.update(chained(call, fns, item, run, split.cfg))
        return
    worker = run.turn_worker
    assert worker is not None
    try:
        while (index := worker.take_last(ticket, len(items))) is not None:
            items[index].update(chained(call, fns, items[index], run, split.cfg))
    except BaseException:
        split_drop(run, split)
        raise
    mine = len(items) - worker.taken_last(ticket)  # the first index computed here
    split.ticket = None
    writes = worker.receive() or []
    for item, written in zip(items, writes[:mine], strict=False):
        item.update(written)
    for item in items[len(writes):mine]:  # not answered for: the worker failed
        item.update(chained(call, fns, item, run, split.cfg))


def split_drop(run: RunContext, split: Split) -> None:
    """Stop the worker's part of ``split`` and wait for its answer, dropped, when what
    it was for failed: the worker takes the process's next request only once this one
    is answered. Nothing when its answer was taken already."""
    if split.ticket is not None:
        worker = run.turn_worker
        assert worker is not None
        worker.take_all(split.ticket, len(split.items))
        split.ticket = None
        worker.receive()


def _chain_reads(names: tuple[str, ...]) -> tuple[str, ...]:
    """The channels node functions ``names`` read (a channel one of them writes for a
    later one is sent as it is now, then replaced in the worker)."""
    return tuple(dict.fromkeys(c for name in names for c in _channels(OFFLOADED[name])))


@functools.cache
def _channels(fn: NodeFn) -> tuple[str, ...]:
    """The channels a per-turn node function reads (what the worker is sent)."""
    return Reads(fn).channels


class BatchShutdownsWrites(TypedDict):
    items: Any


@node
def batch_shutdowns(items: Any, *, run: RunContext) -> BatchShutdownsWrites:
    """The CLAEG terminal-shutdown events of each session of the batch that this store
    has not acknowledged (nodes.load_evidence.bus_events), each a system turn placed
    before the session's first turn of the batch, where one ingest a turn records them."""
    if run.bus is None:
        return {"items": items}
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for item in items:
        session = None if item.get("rejected") is not None else item["turn"]["session"]
        if session is not None and session not in seen:
            seen.add(session)
            for found in unacknowledged(run, session):
                event, turn = shutdown_turn(session, found)
                out.append({"event": event, "turn": turn})
        out.append(item)
    return {"items": out}


class BatchReceiptsWrites(TypedDict):
    items: Any


@node
def batch_receipts(items: Any, *, run: RunContext) -> BatchReceiptsWrites:
    """This store's receipt on the bus for each shutdown event the batch recorded
    (nodes.publish.shutdown: one written later covers one that cannot be written now)."""
    items, bus = items, run.bus
    for item in items:
        event, rec = item.get("event"), item.get("recorded")
        if event is None or rec is None:
            continue
        item["shutdown"] = {
            "exchange_id": rec["exchange_id"], "event_id": event["id"],
            "source": event["source"], "at": iso(event["at"]), "new": not rec["duplicate"],
            "acknowledged": bus is not None and bus.acknowledge(event["id"])}
    return {"items": items}


class BatchPreviousWrites(TypedDict):
    items: Any


@node
def batch_previous(items: Any, *, run: RunContext) -> BatchPreviousWrites:
    """Each turn's ``previous`` (nearest first, as nodes.load_evidence.neighbours reads
    them), and ``duplicate`` for a turn whose source key is stored or came earlier in
    the batch."""
    with run.store.read() as conn:
        previous_after(conn, [], items)
    return {"items": items}


def previous_after(conn: Conn, before: list[dict[str, Any]], items: list[dict[str, Any]]
                   ) -> None:
    """``batch_previous`` on ``items`` read as if the batch ``before`` (computed, not
    stored yet) were stored: its turns to store come before them in their sessions, and
    its source keys count as stored."""
    running: dict[str, list[str]] = {}
    planned = [i for i in before if i.get("rejected") is None and not i.get("duplicate")]
    for item in planned:
        turns_before(conn, running, item["turn"])
    kept = [i for i in items if i.get("rejected") is None]
    keys = [i["turn"]["source_key"] for i in kept if i["turn"]["source_key"] is not None]
    stored = stored_source_keys(conn, keys)
    seen = {i["turn"]["source_key"] for i in planned if i["turn"]["source_key"] is not None}
    for item in kept:
        turn = item["turn"]
        key = turn["source_key"]
        if key is not None:
            if key in stored or key in seen:
                item["duplicate"] = True
                continue
            seen.add(key)
        item["previous"] = turns_before(conn, running, turn)


def turns_before(conn: Conn, running: dict[str, list[str]], turn: dict[str, Any]
                 ) -> list[str]:
    """The turns before ``turn`` in its session, nearest first: the store's for the
    session's first turn of a batch (``running`` holds the batch's so far), then the
    batch's own; ``turn`` joins them for the next."""
    session = turn["session"]
    before = running.get(session)
    if before is None:
        before = previous_contents(conn, session, PREVIOUS_TURNS)
    running[session] = [turn["content"][:NEIGHBOUR_CHARS], *before][:PREVIOUS_TURNS]
    return before


@node
def batch_upkeep(*, run: RunContext) -> NoWrites:
    """What keeps the searches after a bulk write as fast as before it (store:
    ``after_bulk_write``): the derived keyword index takes in the turns the batch
    queued once the queue is longer than a search would use, so no later search waits
    on a queue or steps around it, and PostgreSQL analyzes a store that has outgrown
    its planner statistics. The batch that brings the store to the index's size builds
    it (``build_when_due``)."""
    from nodes.publish.keyword_index import build_when_due

    build_when_due(run.store, beside=False, run=run)
    run.store.after_bulk_write()
    return {}


class BatchReplyWrites(TypedDict):
    reply: Any


@node
def batch_reply(items: Any, briefs: Any) -> BatchReplyWrites:
    """What the batch stored: counts, the refused turns (their place in the batch and
    why), the briefs made."""
    briefs = briefs or []
    stored = [i["recorded"]["exchange_id"] for i in items
              if i.get("recorded") and not i["recorded"]["duplicate"]]
    rejected = [{"index": n, "reason": i["rejected"]} for n, i in enumerate(items)
                if i.get("rejected") is not None]
    duplicates = len(items) - len(stored) - len(rejected)
    text = (f"Ingested {counted(len(stored), 'turn')}; {duplicates} already captured; "
            f"{counted(len(rejected), 'turn')} refused; "
            f"{counted(len(briefs), 'brief')} made")
    shutdowns = [i["shutdown"] for i in items if "shutdown" in i]
    return {"reply": {"text": text, "stored": len(stored), "duplicates": duplicates,
                      "rejected": rejected, "exchange_ids": stored, "compressed": briefs,
                      "shutdowns": shutdowns}}
