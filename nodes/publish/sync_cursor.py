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
from typing import Any

from nodes.context import State, Writes
from nodes.publish.bundle_export import write_bundle
from store.cursors import CursorAdvance, advance_cursor, get_cursor

__all__ = ["INBOX", "OUTBOX", "acked_delivery", "acked_pull", "failed_delivery",
           "failure_text", "outgoing_bundle"]

OUTBOX, INBOX = "outbox:sync", "inbox:sync"


def _kind(direction: str, cfg: Mapping[str, Any]) -> str:
    return str(cfg.get("kind") or (OUTBOX if direction == "outbox" else INBOX))


def _advance(state: State, kind: str, name: str, *, through: int | None, applied: int = 0,
             duplicates: int = 0, error: str | None = None) -> dict[str, Any]:
    with state.ctx.store.write() as conn:
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


def outgoing_bundle(state: State, cfg: Mapping[str, Any]) -> Writes:
    """The next batch after the destination's cursor, written to the spool file."""
    peer, path = state.get("peer"), state.get("spool")
    with state.ctx.store.read() as conn:
        cursor = get_cursor(conn, _kind("outbox", cfg), peer["url"])
    after = cursor.position if cursor is not None else 0
    written = write_bundle(state, Path(path), after, peer["batch"], None)
    return {"outgoing": written}


def acked_delivery(state: State, cfg: Mapping[str, Any]) -> Writes:
    """The destination stored the batch: move the cursor past it."""
    outgoing, delivery = state.get("outgoing"), state.get("delivery")
    return {"cursor": _advance(state, _kind("outbox", cfg), state.get("peer")["url"],
                               through=outgoing["through"],
                               applied=int(delivery.get("applied", 0)),
                               duplicates=int(delivery.get("duplicates", 0)))}


def acked_pull(state: State, cfg: Mapping[str, Any]) -> Writes:
    """The pulled batch is stored: move the inbox cursor past it."""
    bundle, applied = state.get("bundle"), state.get("applied")
    return {"cursor": _advance(state, _kind("inbox", cfg), state.get("peer")["url"],
                               through=bundle["through"], applied=applied["applied"],
                               duplicates=applied["duplicates"])}


def failure_text(state: State, errors: str) -> str:
    """The message of the last failure in the error channel ``errors``."""
    node = state.get(errors)[-1]["node"]
    return (state.errors(node) or [f"{node} failed"])[-1]


def failed_delivery(state: State, cfg: Mapping[str, Any]) -> Writes:
    """Record why a batch did not go through; the cursor stays where it was. The error
    is the ``delivery`` a node wrote, or with ``errors`` (a failure edge's error
    channel) what the failed node raised."""
    peer = state.get("peer")
    direction = peer.get("direction") or str(cfg.get("direction", "outbox"))
    error = (failure_text(state, str(cfg["errors"])) if cfg.get("errors")
             else str(state.get("delivery")["error"]))
    return {"cursor": _advance(state, _kind(direction, cfg), peer["url"], through=None,
                               error=error[:2_000])}
