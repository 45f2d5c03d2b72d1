"""Nodes: the CLAEG terminal-shutdown events of the ingesting session that this store
has not acknowledged, and the next of them as the system turn that records it.

The bus is read once per ingest (``store.bus.Bus.pending_shutdowns``: bounded busy
timeout, back-off after failures, never raises): by ``pending_shutdowns`` before the
ingest decides whether to record any (most turns find none, and skip the claeg
subgraph), or by the first ``shutdown_event`` of a claeg run given none; the loop then
takes the events one by one. Without a bus (``VERITAS_SHARED_DIR=off``) there is
nothing to read.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, NotRequired, TypedDict

from nodes.context import RunContext, node
from nodes.extract.claeg import shutdown_of

__all__ = ["MAX_EVENTS", "pending_shutdowns", "shutdown_event", "shutdown_turn", "unacknowledged"]

MAX_EVENTS = 20  # per ingest; more wait for the next ingest of the session


class PendingShutdownsWrites(TypedDict):
    pending: Any


@node
def pending_shutdowns(turn: Any, *, run: RunContext) -> PendingShutdownsWrites:
    """The session's shutdown events not yet acknowledged, oldest first (rows of
    ``store.bus`` as dicts); empty without a bus."""
    return {"pending": unacknowledged(run, turn["session"])}


def unacknowledged(run: RunContext, session: str) -> list[dict[str, Any]]:
    """The session's events not acknowledged by this store, oldest first, at most
    ``MAX_EVENTS`` (one read of the bus; none without one)."""
    bus = run.bus
    return [] if bus is None else [asdict(e) for e in bus.pending_shutdowns(session, MAX_EVENTS)]


class ShutdownEventWrites(TypedDict):
    pending: Any
    event: Any
    turn: NotRequired[Any]


@node
def shutdown_event(caller: Any, pending: Any, *, run: RunContext) -> ShutdownEventWrites:
    session = caller["session"]
    if pending is None:
        pending = unacknowledged(run, session)
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
