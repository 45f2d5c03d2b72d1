"""Nodes: the record a briefing at session start is made of.

``session_signals`` (after a compaction, or when a session is resumed): the session's
milestones, every decision and blocker it stated with its turn, the later turns that
may say a blocker is fixed, and its last user turns, which become the query that ranks
its briefs the way the compaction guard ranks them (``guard_evidence``).
``project_signals`` (a new session): the same for the most recently active other
sessions of the project directory, without the query.
"""

from __future__ import annotations

from typing import Any, TypedDict

from nodes.context import Cfg, RunContext, node
from nodes.evaluate_contracts.inputs import iso
from nodes.extract.resolutions import FIX_FRAGMENTS
from store.briefing import (
    SessionInfo,
    fix_candidates,
    last_user_turns,
    project_sessions,
    session_info,
    signal_turns,
)
from store.milestones import session_milestones
from store.sql import Conn

__all__ = ["ASKED_TURNS", "PROJECT_SESSIONS", "project_signals", "session_signals"]

ASKED_TURNS = 3  # last user turns: what the user was working on, and the brief query
ASK_CHARS = 700  # of each, for the query and the excerpt
QUERY_CHARS = 2_000  # the longest query a search accepts
PROJECT_SESSIONS = 3  # previous sessions of a directory briefed at startup
MAX_MILESTONES = 50
FIX_TEXT_CHARS = 20_000  # of a later turn, read for fix statements
MIN_ASK_WORDS = 3  # "ok", "go on": not what the user is working on
# Wrappers the host writes as user turns around its own commands: not requests.
_HOST_WRAPPERS = ("<command-", "<local-command-", "<bash-", "<user-memory-input")


def _session(conn: Conn, info: SessionInfo, asks: int) -> dict[str, Any]:
    turns = signal_turns(conn, info.id)
    blockers: list[list[Any]] = [[t.id, text] for t in turns for text in t.blockers]
    fixes: list[list[Any]] = []
    if blockers:  # a fix can only close a blocker stated before it
        first = min(t.id for t in turns if t.blockers)
        fixes = [[i, text] for i, text in fix_candidates(conn, info.id, first, FIX_FRAGMENTS,
                                                         FIX_TEXT_CHARS)]
    asked = [[i, iso(t), text, t] for i, t, text in last_user_turns(conn, info.id, asks * 3,
                                                                     ASK_CHARS)
             if len(text.split()) >= MIN_ASK_WORDS
             and not text.lstrip().startswith(_HOST_WRAPPERS)][:asks]
    return {
        "session": info.name, "session_row": info.id, "turns": info.turns,
        "created_at": iso(info.created_at), "last_at": iso(info.last_at), "cwd": info.cwd,
        "milestones": [[m.exchange_id, m.label, m.excerpt]
                       for m in session_milestones(conn, info.id, MAX_MILESTONES)],
        "decisions": [[t.id, text] for t in turns for text in t.decisions],
        "blockers": blockers,
        "fixes": fixes,
        "asked": asked,
    }


def _query(session_row: int | None, text: str | None, top_k: int,
           until: float | None = None) -> dict[str, Any]:
    """A ranking request shaped as the compaction guard's (``checked_guard``)."""
    return {"text": text, "mode": "hybrid", "role": None, "limit": top_k,
            "session_row": session_row, "unknown_session": session_row is None,
            "since": None, "until": until, "after": None}


class SessionSignalsWrites(TypedDict):
    sessions: Any
    query: Any


@node
def session_signals(session_row: Any, *, run: RunContext) -> SessionSignalsWrites:
    row = session_row
    with run.store.read() as conn:
        info = session_info(conn, row)
        sessions = [] if info is None else [_session(conn, info, ASKED_TURNS)]
    asked = sessions[0]["asked"] if sessions else []
    text = "\n".join(a[2] for a in asked)[:QUERY_CHARS] or None  # newest first
    # The briefs are looked for before the requests: those the requests fall in match
    # them best, and hold what the host has just shown the agent anyway.
    until = min((a[3] for a in asked), default=None)
    return {"sessions": sessions, "query": _query(row, text, run.settings.top_k, until)}


class ProjectSignalsWrites(TypedDict):
    sessions: Any
    query: Any


@node
def project_signals(cwd: Any, session: Any, *, run: RunContext, cfg: Cfg) -> ProjectSignalsWrites:
    limit = int(cfg.get("sessions", PROJECT_SESSIONS))
    with run.store.read() as conn:
        found = project_sessions(conn, cwd, session, limit)
        sessions = [_session(conn, info, 1) for info in found]
    return {"sessions": sessions, "query": _query(None, None, run.settings.top_k)}
