"""Node: the coordination bus in the capture status.

A live probe of the file (bounded by the bus's busy timeout), this process's last
dealings with it (errors, back-off, receipts written, events published), the shutdown
turns stored, and the bus outbox (delivered, pending, last success,
last error — its cursor is also listed with the sync peers under ``delivery``).
"""

from __future__ import annotations

from typing import Any, TypedDict

from nodes.context import RunContext, node
from nodes.evaluate_contracts.inputs import iso
from nodes.publish.bus_outbox import BUS_OUTBOX
from nodes.publish.wording import counted
from store.cursors import get_cursor
from store.shutdowns import count_shutdown_turns
from store.sync import pending_after

__all__ = ["bus_status"]


def _summary(bus: dict[str, Any]) -> str:
    if bus["state"] == "off":
        return "bus: off (VERITAS_SHARED_DIR=off)"
    return _state_text(bus) + _publishing_text(bus["publishing"])


def _state_text(bus: dict[str, Any]) -> str:
    if bus["state"] == "missing":
        return f"bus: none at {bus['path']}"
    if bus["state"] == "ok":
        return (f"bus: ok at {bus['path']}, {counted(bus['pending_shutdowns'], 'shutdown event')}"
                f" unacknowledged, {bus['recorded_shutdowns']} recorded")
    retry = bus["process"]["retry_in_s"]
    return (f"bus: {bus['state']} at {bus['path']} ({bus['detail']}); ingest goes on "
            "without it" + (f", next try in {retry:.0f} s" if retry else ""))


def _publishing_text(p: dict[str, Any]) -> str:
    text = f"; publishing: {p['delivered']:,} delivered, {p['pending']:,} pending"
    if p["last_success_at"]:
        text += f", last success {p['last_success_at']}"
    if p["last_error"]:
        text += f", last error {p['last_error_at']}: {str(p['last_error'])[:160]}"
    return text


def _publishing(run: RunContext, path: str) -> dict[str, Any]:
    """The bus outbox (its ``outbox:bus`` cursor): turns delivered and pending, the
    last success and the last error."""
    with run.store.read() as conn:
        cursor = get_cursor(conn, BUS_OUTBOX, path)
        position = 0 if cursor is None else cursor.position
        pending = pending_after(conn, position)[0]
    return {
        "enabled": run.settings.bus_publish, "position": position, "pending": pending,
        "delivered": 0 if cursor is None else cursor.captured,
        "duplicates": 0 if cursor is None else cursor.duplicates,
        "batches": 0 if cursor is None else cursor.lines,
        "last_success_at": None if cursor is None or cursor.last_success_at is None
        else iso(cursor.last_success_at),
        "last_error": None if cursor is None else cursor.last_error,
        "last_error_at": None if cursor is None or cursor.last_error_at is None
        else iso(cursor.last_error_at),
    }


class BusStatusWrites(TypedDict):
    reply: Any


@node
def bus_status(status: Any, text: Any, *, run: RunContext) -> BusStatusWrites:
    status = dict(status)
    with run.store.read() as conn:
        recorded = count_shutdown_turns(conn)
    bus = run.bus
    if bus is None:
        report: dict[str, Any] = {"state": "off", "path": None, "detail": None,
                                  "pending_shutdowns": None, "process": None}
    else:
        report = {"path": str(bus.path), **bus.probe(), "process": bus.snapshot(),
                  "publishing": _publishing(run, str(bus.path))}
    report["recorded_shutdowns"] = recorded
    status["bus"] = report
    return {"reply": {"text": f"{text} | {_summary(report)}", "status": status}}
