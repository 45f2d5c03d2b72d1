"""Node: the coordination bus in the capture status (issue #8 item 3).

A live probe of the file (bounded by the bus's busy timeout), this process's last
dealings with it (errors, back-off, receipts written) and the shutdown turns stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodes.context import State, Writes
from store.shutdowns import count_shutdown_turns

__all__ = ["bus_status"]


def _summary(bus: dict[str, Any]) -> str:
    if bus["state"] == "off":
        return "bus: off (VERITAS_SHARED_DIR=off)"
    if bus["state"] == "missing":
        return f"bus: none at {bus['path']}"
    if bus["state"] == "ok":
        return (f"bus: ok at {bus['path']}, {bus['pending_shutdowns']} shutdown events "
                f"unacknowledged, {bus['recorded_shutdowns']} recorded")
    retry = bus["process"]["retry_in_s"]
    return (f"bus: {bus['state']} at {bus['path']} ({bus['detail']}); ingest goes on "
            "without it" + (f", next try in {retry:.0f} s" if retry else ""))


def bus_status(state: State, cfg: Mapping[str, Any]) -> Writes:
    status, text = dict(state.get("status")), state.get("text")
    with state.ctx.store.read() as conn:
        recorded = count_shutdown_turns(conn)
    bus = state.ctx.bus
    if bus is None:
        report: dict[str, Any] = {"state": "off", "path": None, "detail": None,
                                  "pending_shutdowns": None, "process": None}
    else:
        report = {"path": str(bus.path), **bus.probe(), "process": bus.snapshot()}
    report["recorded_shutdowns"] = recorded
    status["bus"] = report
    return {"status": status, "text": f"{text} | {_summary(report)}"}
