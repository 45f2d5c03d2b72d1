"""Nodes: the next session that an import (or a process killed between an ingest and
its compression) left holding a full batch of uncompressed turns (the compress nodes
then fold it, as after an ingest), and the list of the sessions so found."""

from __future__ import annotations

from typing import Any, TypedDict

from nodes.context import RunContext, node
from store.sync import next_overdue

__all__ = ["RecoverReply", "overdue_session", "recovered_reply", "recovered_session"]


class OverdueSessionWrites(TypedDict):
    session_row: Any
    after_session: Any
    rounds: Any
    briefs: Any
    sessions_compressed: Any


@node
def overdue_session(after_session: Any, session_row: Any, rounds: Any, briefs: Any,
                    sessions_compressed: Any, *, run: RunContext) -> OverdueSessionWrites:
    """Sessions are visited in row order. A session whose compression stopped at its
    round limit while still making briefs is visited again; one that made none (lost
    every claim, or nothing to fold) is passed."""
    after = int(after_session or 0)
    current = session_row
    if current is not None and briefs:
        # The compression's round limit, from its module, which its nodes (just run)
        # imported: a server's start-up run that finds nothing overdue never imports it.
        from nodes.publish.brief import MAX_ROUNDS

        if (rounds or 0) >= MAX_ROUNDS:
            after = int(current) - 1
    with run.store.read() as conn:
        found = next_overdue(conn, after, run.settings.turn_limit)
    visited = int(sessions_compressed or 0) + (1 if current is not None else 0)
    return {"session_row": found, "after_session": found if found is not None else after,
            "rounds": 0, "briefs": [], "sessions_compressed": visited}


class RecoveredSessionWrites(TypedDict):
    recovered: Any


@node
def recovered_session(session_row: Any, recovered: Any) -> RecoveredSessionWrites:
    """Adds the session ``overdue_session`` found to ``recovered`` (once: a session left
    at its round limit is visited again)."""
    found = session_row
    return {"recovered": [] if found in (recovered or []) else [found]}


class RecoverReply(TypedDict):
    """The recover graph's output: the row ids of the sessions it compressed."""

    recovered: list[int]


class RecoveredReplyWrites(TypedDict):
    reply: RecoverReply


@node
def recovered_reply(recovered: list[int]) -> RecoveredReplyWrites:
    return {"reply": RecoverReply(recovered=[int(row) for row in recovered])}
