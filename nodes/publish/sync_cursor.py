"""Nodes: the outbox and inbox cursors of a peer (``cursors`` rows, migration 8).

The outbox of a destination is the record itself read after the destination's cursor
(store.sync); the cursor moves only once the destination acknowledged a batch, so a
sender killed at any moment sends the unacknowledged batch again and the receiver's
idempotent apply makes that harmless: at-least-once delivery, exactly-once result.
Kinds are ``outbox:<destination kind>`` and ``inbox:<source kind>``: sync uses
``outbox:sync`` and ``inbox:sync``; another kind of destination (a coordination bus)
takes a kind of its own and the same nodes.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict

from nodes.context import Cfg, RunContext, node
from nodes.publish.bundle_export import write_bundle
from store.cursors import CursorAdvance, advance_cursor, get_cursor

__all__ = ["INBOX", "OUTBOX", "acked_delivery", "acked_pull", "failed_delivery",
           "failure_text", "outgoing_bundle"]

OUTBOX, INBOX = "outbox:sync", "inbox:sync"


def _kind(direction: str, cfg: Mapping[str, Any]) -> str:
    return str(cfg.get("kind") or (OUTBOX if direction == "outbox" else INBOX))


def _advance(run: RunContext, kind: str, name: str, *, through: int | None, applied: int = 0,
             duplicates: int = 0, error: str | None = None) -> dict[str, Any]:
    with run.store.write() as conn:
        old = get_cursor(conn, kind, name)
        position = old.position if old is not None else 0
        batches = old.lines if old is not None else 0
        ok = error is None
        cursor = advance_cursor(conn, CursorAdvance(
            # Forward only: two deliverers of one store (two server processes) may
            # acknowledge batches out of order.
            kind=kind, name=name, position=max(position, through or 0),
            lines=batches + (1 if ok else 0), identity=None, head=None, session=None,
            at=time.time(), captured=applied, duplicates=duplicates, ok=ok, error=error))
    return {"kind": cursor.kind, "peer": cursor.name, "position": cursor.position,
            "batches": cursor.lines, "delivered": cursor.captured,
            "duplicates": cursor.duplicates}


class OutgoingBundleWrites(TypedDict):
    outgoing: Any


@node
def outgoing_bundle(peer: Any, spool: Any, *, run: RunContext, cfg: Cfg) -> OutgoingBundleWrites:
    """The next batch after the destination's cursor, written to the spool file."""
    path = spool
    with run.store.read() as conn:
        cursor = get_cursor(conn, _kind("outbox", cfg), peer["url"])
    after = cursor.position if cursor is not None else 0
    written = write_bundle(run, Path(path), after, peer["batch"], None)
    return {"outgoing": written}


class CursorWrites(TypedDict):
    """What a node that moves (or keeps) a sync cursor writes."""

    cursor: Any


@node
def acked_delivery(outgoing: Any, delivery: Any, peer: Any, *, run: RunContext,
                   cfg: Cfg) -> CursorWrites:
    """The destination stored the batch: move the cursor past it."""
    return {"cursor": _advance(run, _kind("outbox", cfg), peer["url"],
                               through=outgoing["through"],
                               applied=int(delivery.get("applied", 0)),
                               duplicates=int(delivery.get("duplicates", 0)))}


@node
def acked_pull(bundle: Any, applied: Any, peer: Any, *, run: RunContext,
               cfg: Cfg) -> CursorWrites:
    """The pulled batch is stored: move the inbox cursor past it."""
    return {"cursor": _advance(run, _kind("inbox", cfg), peer["url"],
                               through=bundle["through"], applied=applied["applied"],
                               duplicates=applied["duplicates"])}


def failure_text(run: RunContext, failures: list[dict[str, Any]]) -> str:
    """The message of the last failure recorded in a failure edge's error channel."""
    node = failures[-1]["node"]
    return (run.errors(node) or [f"{node} failed"])[-1]


@node
def failed_delivery(peer: Any, delivery: Any = None, failures: Any = None, *, run: RunContext,
                    cfg: Cfg) -> CursorWrites:
    """Record why a batch did not go through; the cursor stays where it was. The error
    is the ``delivery`` a node wrote, or with ``errors`` (the failure edge's error
    channel, ``failures``) what the failed node raised."""
    direction = peer.get("direction") or str(cfg.get("direction", "outbox"))
    error = (failure_text(run, failures) if cfg.get("errors")
             else str(delivery["error"]))
    return {"cursor": _advance(run, _kind(direction, cfg), peer["url"], through=None,
                               error=error[:2_000])}
