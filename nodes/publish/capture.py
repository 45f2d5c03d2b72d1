"""Node: record where a transcript now stands (its cursor) and what the pass did, and
the directory its session works in (what a briefing at session start looks up)."""

from __future__ import annotations

import time
from typing import Any, TypedDict

from nodes.context import RunContext, node
from store.briefing import set_session_cwd
from store.cursors import CursorAdvance, advance_cursor

__all__ = ["advanced_cursor"]


class AdvancedCursorWrites(TypedDict):
    cursor: Any


@node
def advanced_cursor(step: Any, *, run: RunContext) -> AdvancedCursorWrites:
    fields = dict(step)
    cwd = fields.pop("cwd", None)
    step = CursorAdvance(**fields, at=time.time())
    with run.store.write() as conn:
        cursor = advance_cursor(conn, step)
        if cwd is not None and cursor.session is not None:
            set_session_cwd(conn, f"{step.kind}:{cursor.session}", cwd)
    return {"cursor": cursor.as_dict()}
