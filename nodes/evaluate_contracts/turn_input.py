"""Node: validate one turn before anything is stored (the next node, ``redacted_turn``,
redacts its secrets and hashes it)."""

from __future__ import annotations

import time
from typing import Any, TypedDict

from nodes.context import RunContext, node
from nodes.evaluate_contracts.inputs import (
    TRACE_ID_FORM,
    check_session_id,
    check_text,
    check_time,
    check_trace_id,
)
from nodes.evaluate_contracts.requests import IngestRequest, parsed

__all__ = ["TRACE_ID_FORM", "checked_turn"]

MAX_SOURCE_KEY_CHARS = 500


class CheckedTurnWrites(TypedDict):
    turn: Any


@node
def checked_turn(request: Any, *, run: RunContext) -> CheckedTurnWrites:
    """The turn, validated and normalised: created_at in epoch seconds."""
    raw = request or {}
    given = parsed(IngestRequest, raw)
    session = check_session_id(given.session_id)
    content = check_text("content", given.content, max_chars=run.settings.max_content_chars)
    created_at = check_time("created_at", given.created_at)
    source_key = given.source_key
    if source_key is not None:
        source_key = check_text("source_key", source_key, max_chars=MAX_SOURCE_KEY_CHARS)
    trace_id = check_trace_id(given.trace_id)
    return {
        "turn": {
            "session": session,
            "role": given.role,
            "content": content,
            "created_at": time.time() if created_at is None else created_at,
            "source_key": source_key,
            "trace_id": trace_id,
        }
    }
