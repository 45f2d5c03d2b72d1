"""Delivery status: the sync outbox and inbox per peer (their cursors, what is pending,
what was delivered, the last success and the last error)."""

from __future__ import annotations

from typing import Any

from nodes.evaluate_contracts.inputs import iso
from store.cursors import recent_cursors
from store.sql import Conn
from store.sync import pending_after

__all__ = ["LISTED_PEERS", "delivery_summary"]

LISTED_PEERS = 50


def _when(seconds: float | None) -> str | None:
    return None if seconds is None else iso(seconds)


def delivery_summary(conn: Conn, configured: str | None
                     ) -> tuple[dict[str, Any], str]:
    """The ``delivery`` part of status, and its line of text."""
    peers: list[dict[str, Any]] = []
    for c in recent_cursors(conn, LISTED_PEERS, peers=True):
        direction, _, dest = c.kind.partition(":")
        pending = pending_after(conn, c.position)[0] if direction == "outbox" else None
        peers.append({
            "direction": direction, "destination": dest, "peer": c.name,
            "position": c.position, "pending": pending, "batches": c.lines,
            "delivered" if direction == "outbox" else "received": c.captured,
            "duplicates": c.duplicates, "last_success_at": _when(c.last_success_at),
            "last_error": c.last_error, "last_error_at": _when(c.last_error_at)})
    if configured is not None and not any(
            p["peer"] == configured and p["direction"] == "outbox" for p in peers):
        peers.append({"direction": "outbox", "destination": "sync", "peer": configured,
                      "position": 0, "pending": pending_after(conn, 0)[0], "batches": 0,
                      "delivered": 0, "duplicates": 0, "last_success_at": None,
                      "last_error": None, "last_error_at": None})
    outbox = [p for p in peers if p["direction"] == "outbox"]
    errors = sorted((p for p in peers if p["last_error_at"]),
                    key=lambda p: p["last_error_at"], reverse=True)
    delivery = {
        "configured_peer": configured,
        "peers": peers,
        "pending": sum(p["pending"] for p in outbox),
        "delivered": sum(p["delivered"] for p in outbox),
        "received": sum(p.get("received", 0) for p in peers),
        "last_success_at": max((p["last_success_at"] for p in peers
                                if p["last_success_at"]), default=None),
        "last_error": None if not errors else {
            "peer": errors[0]["peer"], "direction": errors[0]["direction"],
            "error": errors[0]["last_error"], "at": errors[0]["last_error_at"]},
    }
    return delivery, _text(delivery)


def _text(d: dict[str, Any]) -> str:
    if not d["peers"]:
        return "delivery: no sync peers (stenographer sync push --to URL, STENO_SYNC_PEER)"
    parts = []
    for p in d["peers"][:5]:
        if p["direction"] == "outbox":
            parts.append(f"to {p['peer']}: {p['delivered']:,} delivered, "
                         f"{p['pending']:,} pending")
        else:
            parts.append(f"from {p['peer']}: {p['received']:,} received")
    if d["last_success_at"]:
        parts.append(f"last success {d['last_success_at']}")
    if d["last_error"]:
        e = d["last_error"]
        parts.append(f"last error {e['at']} ({e['direction']} {e['peer']}): "
                     f"{str(e['error'])[:160]}")
    return "delivery: " + "; ".join(parts)
