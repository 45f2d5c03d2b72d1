"""Reads behind the briefing a host hook prints when a session starts, and the record of
the directory a session worked in (migration 13).

All reads are bounded by one session (its signal turns, the later turns that may say a
blocker is fixed, its last user turns) or by a small limit (the recent sessions of a
project directory).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from store.sql import Conn, Row, all_rows, first

__all__ = [
    "SessionInfo",
    "SignalTurn",
    "fix_candidates",
    "fix_candidates_sql",
    "last_user_turns",
    "project_sessions",
    "session_info",
    "set_session_cwd",
    "signal_turns",
]


@dataclass(frozen=True)
class SessionInfo:
    id: int
    name: str
    created_at: float
    last_at: float
    turns: int
    cwd: str | None


@dataclass(frozen=True)
class SignalTurn:
    """A turn that states decisions or blockers (``exchanges.signals``)."""

    id: int
    role: str
    created_at: float
    decisions: tuple[str, ...]
    blockers: tuple[str, ...]


SET_SESSION_CWD = """
UPDATE sessions SET cwd = ?2 WHERE name = ?1 AND (cwd IS NULL OR cwd <> ?2)"""
_SESSION_COLUMNS = "id, name, created_at, last_at, turns, cwd"
SELECT_SESSION = f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = ?"
SELECT_PROJECT_SESSIONS = f"""
SELECT {_SESSION_COLUMNS} FROM sessions WHERE cwd = ?1 AND name <> ?2
ORDER BY last_at DESC, id DESC LIMIT ?3"""
SELECT_SIGNAL_TURNS = """
SELECT id, role, created_at, signals FROM exchanges
WHERE session_id = ? AND signals IS NOT NULL ORDER BY id"""
# The turns after ``?2`` whose text holds one of the fragments (``?3`` and on, lower
# case, as LIKE patterns): the candidates a fix statement is looked for in.
SELECT_FIX_CANDIDATES = """
SELECT id, substr(content, 1, ?3) FROM exchanges
WHERE session_id = ?1 AND id > ?2 AND ({screen}) ORDER BY id"""
SELECT_LAST_USER = """
SELECT id, created_at, substr(content, 1, ?3) FROM exchanges
WHERE session_id = ?1 AND role = 'user' ORDER BY id DESC LIMIT ?2"""


def set_session_cwd(conn: Conn, session: str, cwd: str) -> bool:
    """Record the directory session ``session`` (its name) works in; whether it
    changed. A session not stored yet is left alone. Call inside a write."""
    conn.execute(SET_SESSION_CWD, (session, cwd))
    return conn.changes() > 0


def _info(row: Row) -> SessionInfo:
    return SessionInfo(int(row[0]), str(row[1]), float(row[2]), float(row[3]), int(row[4]),
                       None if row[5] is None else str(row[5]))


def session_info(conn: Conn, session_id: int) -> SessionInfo | None:
    row = first(conn, SELECT_SESSION, (session_id,))
    return None if row is None else _info(row)


def project_sessions(conn: Conn, cwd: str, exclude: str, limit: int) -> list[SessionInfo]:
    """The sessions that worked in ``cwd``, most recently active first, except the one
    named ``exclude``."""
    return [_info(r) for r in all_rows(conn, SELECT_PROJECT_SESSIONS, (cwd, exclude, limit))]


def signal_turns(conn: Conn, session_id: int) -> list[SignalTurn]:
    """Every turn of a session that states a decision or a blocker, oldest first."""
    out = []
    for turn_id, role, created_at, signals in all_rows(conn, SELECT_SIGNAL_TURNS,
                                                       (session_id,)):
        found = json.loads(signals)
        out.append(SignalTurn(int(turn_id), str(role), float(created_at),
                              tuple(found.get("d", ())), tuple(found.get("b", ()))))
    return out


def fix_candidates_sql(fragments: int) -> str:
    return SELECT_FIX_CANDIDATES.format(
        screen=" OR ".join(f"lower(content) LIKE ?{4 + i}" for i in range(fragments)))


def fix_candidates(conn: Conn, session_id: int, after: int, fragments: Sequence[str],
                   max_chars: int) -> list[tuple[int, str]]:
    """(id, the first ``max_chars`` characters) of the turns of a session after turn
    ``after`` whose lower-cased text contains one of ``fragments``, oldest first."""
    if not fragments:
        return []
    patterns = [f"%{f.lower()}%" for f in fragments]
    rows = all_rows(conn, fix_candidates_sql(len(patterns)),
                    (session_id, after, max_chars, *patterns))
    return [(int(i), str(text)) for i, text in rows]


def last_user_turns(conn: Conn, session_id: int, limit: int, max_chars: int
                    ) -> list[tuple[int, float, str]]:
    """(id, time, the first ``max_chars`` characters) of the newest ``limit`` user turns
    of a session, newest first."""
    return [(int(i), float(t), str(c))
            for i, t, c in all_rows(conn, SELECT_LAST_USER, (session_id, limit, max_chars))]
