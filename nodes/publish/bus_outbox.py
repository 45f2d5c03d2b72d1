"""Nodes: publish the outbox to the coordination bus.

The same outbox and cursor nodes as sync (nodes.publish.sync_cursor): the destination
is the bus file (its path names the cursor, of kind ``outbox:bus``), a batch is the
turns after the cursor as ``STENO_EXCHANGE`` events (store.bus_outbox), delivering is
one bus transaction that inserts the events whose key is not there yet
(store.bus.Bus.publish), and the cursor moves only after that transaction committed.
A process that dies between the two re-sends the batch and finds every key there: the
bus receives each turn once. A failure (missing, locked, corrupt bus) is recorded on
the cursor and ends the run; the scheduler backs off and runs it again (stenographer.bus):
nothing is lost.
"""

from __future__ import annotations

from typing import Any, TypedDict

from nodes.context import RunContext, node
from nodes.evaluate_contracts.requests import BusPublishRequest, parsed
from nodes.publish.wording import counted
from store.bus import BusUnavailable, OutgoingEvent
from store.bus_outbox import bus_batch
from store.cursors import get_cursor
from store.errors import InvalidInput

__all__ = ["BUS_OUTBOX", "bus_destination", "bus_publish_reply", "bus_totals",
           "outgoing_events", "published_events"]

BUS_OUTBOX = "outbox:bus"
DEFAULT_BATCH = 200  # events per bus transaction when the caller gives none


class BusDestinationWrites(TypedDict):
    peer: dict[str, Any]


@node
def bus_destination(request: Any, *, run: RunContext) -> BusDestinationWrites:
    """The configured bus as the destination, and the batch size."""
    bus = run.bus
    if bus is None:
        raise InvalidInput("no coordination bus is configured (VERITAS_SHARED_DIR=off): "
                           "set VERITAS_SHARED_DIR to the bus directory")
    batch = parsed(BusPublishRequest, request).batch or DEFAULT_BATCH
    return {"peer": {"url": str(bus.path), "batch": batch, "direction": "outbox"}}


class OutgoingEventsWrites(TypedDict):
    outgoing: Any
    events: Any


@node
def outgoing_events(peer: Any, *, run: RunContext) -> OutgoingEventsWrites:
    """The next batch of turns after the bus cursor, as events."""
    with run.store.read() as conn:
        cursor = get_cursor(conn, BUS_OUTBOX, peer["url"])
        after = cursor.position if cursor is not None else 0
        batch = bus_batch(conn, after, peer["batch"], run.settings.bus_excerpt_chars)
    return {"outgoing": {"after": after, "through": batch.through, "records": batch.records,
                         "events": len(batch.events)},
            "events": batch.events}


class PublishedEventsWrites(TypedDict):
    delivery: Any


@node
def published_events(events: list[OutgoingEvent], *, run: RunContext) -> PublishedEventsWrites:
    """Insert the batch's events not on the bus yet, in one bus transaction."""
    bus = run.bus
    assert bus is not None  # bus_destination checked
    try:
        inserted, there = bus.publish(events, run.settings.bus_publish_timeout_ms)
    except BusUnavailable as ex:
        return {"delivery": {"ok": False, "retryable": True, "state": ex.state,
                             "error": f"the bus is {ex.state}: {ex.detail}"[:2_000]}}
    return {"delivery": {"ok": True, "applied": inserted, "duplicates": there}}


def _batch_line(peer: dict[str, Any], outgoing: dict[str, Any], delivery: dict[str, Any]
                ) -> str:
    passed_over = outgoing["records"] - outgoing["events"]
    return (f"Published turns #{outgoing['after'] + 1}-#{outgoing['through']} to "
            f"{peer['url']}: {counted(delivery['applied'], 'new event')}, "
            f"{delivery['duplicates']:,} already there"
            + (f", {counted(passed_over, 'forgotten turn')} passed over" if passed_over else ""))


class BusTotalsWrites(TypedDict):
    totals: Any


@node
def bus_totals(outgoing: Any, delivery: Any, totals: Any, peer: Any) -> BusTotalsWrites:
    """The run's totals with this batch added; ``more`` while a batch went through.
    A failed batch ends the run (the scheduler backs off before the next)."""
    totals = dict(totals or {
        "ok": True, "batches": 0, "records": 0, "published": 0, "duplicates": 0,
        "error": None, "retryable": False, "through": None, "lines": []})
    totals["more"] = False
    if outgoing["through"] is None:  # drained (``delivery`` is a previous batch's)
        return {"totals": totals}
    if not delivery["ok"]:
        totals["ok"], totals["retryable"] = False, bool(delivery["retryable"])
        totals["error"] = f"Publishing to {peer['url']} failed: " \
                          f"{delivery['error']}"
        return {"totals": totals}
    totals["batches"] += 1
    totals["records"] += int(outgoing["records"])
    totals["published"] += int(delivery["applied"])
    totals["duplicates"] += int(delivery["duplicates"])
    totals["through"], totals["more"] = outgoing["through"], True
    totals["lines"] = [*totals["lines"], _batch_line(peer, outgoing, delivery)]
    return {"totals": totals}


class BusPublishReplyWrites(TypedDict):
    reply: Any


@node
def bus_publish_reply(peer: Any, totals: Any, cursor: Any, *,
                      run: RunContext) -> BusPublishReplyWrites:
    """What the run published, in total."""
    text = (f"Published to {peer['url']}: {counted(totals['batches'], 'batch', 'batches')}, "
            f"{counted(totals['published'], 'new event')}, "
            f"{totals['duplicates']:,} already there")
    if not totals["ok"]:
        text += f"; stopped: {totals['error']}"
    fields = ("ok", "batches", "records", "published", "duplicates", "error", "retryable",
              "through", "lines")
    return {"reply": {**{k: totals[k] for k in fields}, "text": text,
                      "cursor": cursor}}
