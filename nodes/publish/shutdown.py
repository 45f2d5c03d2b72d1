"""Node: acknowledge a recorded CLAEG shutdown event with this store's receipt on the bus.

The turn (and its TERMINAL_SHUTDOWN milestone) is already stored under the event's
source key, so a receipt that cannot be written now (bus locked) is written by a later
ingest, which finds the turn stored and does not store it again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodes.context import State, Writes
from nodes.evaluate_contracts.inputs import iso

__all__ = ["acknowledged_shutdown"]


def acknowledged_shutdown(state: State, cfg: Mapping[str, Any]) -> Writes:
    event, rec = state.get("event"), state.get("recorded")
    bus = state.ctx.bus
    acknowledged = bus is not None and bus.acknowledge(event["id"])
    return {"shutdowns": [{
        "exchange_id": rec["exchange_id"],
        "event_id": event["id"],
        "source": event["source"],
        "at": iso(event["at"]),
        "new": not rec["duplicate"],
        "acknowledged": acknowledged,
    }]}
