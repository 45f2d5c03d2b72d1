"""Node: acknowledge a recorded CLAEG shutdown event with this store's receipt on the bus.

The turn (and its TERMINAL_SHUTDOWN milestone) is already stored under the event's
source key, so a receipt that cannot be written now (bus locked) is written by a later
ingest, which finds the turn stored and does not store it again.
"""

from __future__ import annotations

from typing import Any, TypedDict

from nodes.context import RunContext, node
from nodes.evaluate_contracts.inputs import iso

__all__ = ["acknowledged_shutdown"]


class AcknowledgedShutdownWrites(TypedDict):
    shutdowns: Any


@node
def acknowledged_shutdown(event: Any, recorded: Any, *,
                          run: RunContext) -> AcknowledgedShutdownWrites:
    rec = recorded
    bus = run.bus
    acknowledged = bus is not None and bus.acknowledge(event["id"])
    return {"shutdowns": [{
        "exchange_id": rec["exchange_id"],
        "event_id": event["id"],
        "source": event["source"],
        "at": iso(event["at"]),
        "new": not rec["duplicate"],
        "acknowledged": acknowledged,
    }]}
