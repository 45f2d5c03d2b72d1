"""Node: the next CLAEG terminal-shutdown event of the ingesting session that this
store has not acknowledged, as the system turn that records it.

The first call of a run reads the bus once (``store.bus.Bus.pending_shutdowns``: bounded
busy timeout, back-off after failures, never raises); the loop then takes the events
one by one. Without a bus (``VERITAS_SHARED_DIR=off``) there is nothing to read.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, NotRequired, TypedDict

from nodes.context import RunContext, node
from nodes.extract.claeg import shutdown_of

__all__ = ["MAX_EVENTS", "shutdown_event", "shutdown_turn"]

MAX_EVENTS = 20  # per ingest; more wait for the next ingest of the session


class ShutdownEventWrites(TypedDict):
    pending: Any
    event: Any
    turn: NotRequired[Any]


@node
def shutdown_event(caller: Any, pending: Any, *, run: RunContext) -> ShutdownEventWrites:
    session = caller["session"]
    if pending is None:
        bus = run.bus
        found = [] if bus is None else bus.pending_shutdowns(session, MAX_EVENTS)
        pending = [asdict(e) for e in found]
    if not pending:
        return {"pending": [], "event": None}
    event, turn = shutdown_turn(session, pending[0])
    return {"pending": pending[1:], "event": event, "turn": turn}


def shutdown_turn(session: str, found: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A pending event (``store.bus`` row as a dict) of ``session``: the event and the
    system turn that records it."""
    shutdown = shutdown_of(found)
    return ({"id": shutdown.event_id, "source": shutdown.source, "at": shutdown.at}, {
        "session": session,
        "role": "system",
        "content": shutdown.content,
        "created_at": shutdown.at,
        "source_key": shutdown.source_key,
        "trace_id": None,  # the session's, as for any turn that names none
        "milestone": shutdown.label,
    })
