"""Node: validate a briefing request and decide what it is about.

A host starts (or restarts) a session and asks what it should know:

* ``compact`` (the context was just compacted) and ``resume``: the session's own
  record (scope ``session``), when the store holds that session;
* ``startup``: the previous sessions of the same project directory (scope ``project``);
* anything else (``clear``, a source a host adds later), or a session the store has
  never seen: nothing (scope ``none``).
"""

from __future__ import annotations

from pathlib import PurePosixPath, PureWindowsPath
from typing import Any, TypedDict

from nodes.context import RunContext, node
from nodes.evaluate_contracts.inputs import check_int, check_session_id, check_text
from store.errors import InvalidInput
from store.exchanges import session_row_id

__all__ = ["MAX_BRIEFING_CHARS", "MIN_BRIEFING_CHARS", "SESSION_SOURCES", "checked_briefing"]

SESSION_SOURCES = ("compact", "resume")
PROJECT_SOURCES = ("startup",)
MIN_BRIEFING_CHARS, MAX_BRIEFING_CHARS = 1_000, 10_000
_MAX_SOURCE_CHARS = 40
_MAX_CWD_CHARS = 4_096


def _cwd(value: Any) -> str | None:
    if value is None or value == "":
        return None
    text = check_text("cwd", value, max_chars=_MAX_CWD_CHARS)
    if not (PurePosixPath(text).is_absolute() or PureWindowsPath(text).is_absolute()):
        raise InvalidInput(f"cwd={text[:80]!r} must be an absolute directory, e.g. "
                           "/home/me/work/app")
    return text


class CheckedBriefingWrites(TypedDict):
    session: Any
    session_row: Any
    source: Any
    cwd: Any
    max_chars: Any
    scope: Any


@node
def checked_briefing(request: Any, *, run: RunContext) -> CheckedBriefingWrites:
    req = request or {}
    session = check_session_id(req.get("session_id"))
    source = check_text("source", req.get("source") or "startup", max_chars=_MAX_SOURCE_CHARS)
    cwd = _cwd(req.get("cwd"))
    max_chars = check_int("max_chars",
                          req.get("max_chars") or run.settings.briefing_chars,
                          MIN_BRIEFING_CHARS, MAX_BRIEFING_CHARS)
    with run.store.read() as conn:
        row = session_row_id(conn, session)
    if source in SESSION_SOURCES and row is not None:
        scope = "session"
    elif source in PROJECT_SOURCES and cwd is not None:
        scope = "project"
    else:
        scope = "none"
    return {"session": session, "session_row": row, "source": source, "cwd": cwd,
            "max_chars": max_chars, "scope": scope}
