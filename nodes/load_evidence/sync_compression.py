"""Nodes: the next session that an import (or a process killed between an ingest and
its compression) left holding a full batch of uncompressed turns (the compress nodes
then fold it, as after an ingest), and the list of the sessions so found."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodes.context import State, Writes
from nodes.publish.brief import MAX_ROUNDS
from store.sync import next_overdue

__all__ = ["overdue_session", "recovered_session"]


def overdue_session(state: State, cfg: Mapping[str, Any]) -> Writes:
    """Sessions are visited in row order. A session whose compression stopped at its
    round limit while still making briefs is visited again; one that made none (lost
    every claim, or nothing to fold) is passed."""
    after = int(state.get("after_session") or 0)
    current = state.get("session_row")
    if current is not None and (state.get("rounds") or 0) >= MAX_ROUNDS and state.get("briefs"):
        after = int(current) - 1
    with state.ctx.store.read() as conn:
        found = next_overdue(conn, after, state.ctx.settings.turn_limit)
    visited = int(state.get("sessions_compressed") or 0) + (1 if current is not None else 0)
    return {"session_row": found, "after_session": found if found is not None else after,
            "rounds": 0, "briefs": [], "sessions_compressed": visited}


def recovered_session(state: State, cfg: Mapping[str, Any]) -> Writes:
    """Adds the session ``overdue_session`` found to ``recovered`` (once: a session left
    at its round limit is visited again)."""
    found = state.get("session_row")
    return {"recovered": [] if found in (state.get("recovered") or []) else [found]}
