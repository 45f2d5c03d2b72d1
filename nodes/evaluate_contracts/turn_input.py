"""Node: validate one turn before anything is stored (the next node, ``redacted_turn``,
redacts its secrets and hashes it)."""

from __future__ import annotations

import time
from typing import Any, TypedDict

from nodes.context import RunContext, node
from nodes.evaluate_contracts.inputs import (
    ROLES,
    TRACE_ID_FORM,
    check_session_id,
    check_text,
    check_time,
    check_trace_id,
)
from store.errors import InvalidInput

__all__ = ["TRACE_ID_FORM", "checked_turn"]

MAX_SOURCE_KEY_CHARS = 500


class CheckedTurnWrites(TypedDict):
    turn: Any


@node
def checked_turn(request: Any, *, run: RunContext) -> CheckedTurnWrites:
    """The turn, validated and normalised: created_at in epoch seconds."""
    raw = request or {}
    role = raw.get("role")
    if role not in ROLES:
        raise InvalidInput(f"role={role!r} is not valid; valid roles: {', '.join(ROLES)}")
    session = check_session_id(raw.get("session_id"))
    content = check_text(
        "content", raw.get("content"), max_chars=run.settings.max_content_chars
    )
    created_at = check_time("created_at", raw.get("created_at"))
    source_key = raw.get("source_key")
    if source_key is not None:
        source_key = check_text("source_key", source_key, max_chars=MAX_SOURCE_KEY_CHARS)
    trace_id = check_trace_id(raw.get("trace_id"))
    return {
        "turn": {
            "session": session,
            "role": role,
            "content": content,
            "created_at": time.time() if created_at is None else created_at,
            "source_key": source_key,
            "trace_id": trace_id,
        }
    }
