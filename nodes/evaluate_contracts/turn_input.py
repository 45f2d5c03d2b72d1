"""Node: validate one turn before anything is stored."""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Mapping
from typing import Any

from nodes.context import State, Writes
from nodes.evaluate_contracts.inputs import (
    ROLES,
    check_session_id,
    check_text,
    check_time,
)
from store.errors import InvalidInput

__all__ = ["TRACE_ID_FORM", "checked_turn"]

TRACE_ID_FORM = re.compile(r"VT-\d{8}-[0-9a-f]{8}")
MAX_SOURCE_KEY_CHARS = 500


def checked_turn(state: State, cfg: Mapping[str, Any]) -> Writes:
    """The turn, validated and normalised: created_at in epoch seconds, content hash."""
    raw = state.get("request") or {}
    role = raw.get("role")
    if role not in ROLES:
        raise InvalidInput(f"role={role!r} is not valid; valid roles: {', '.join(ROLES)}")
    session = check_session_id(raw.get("session_id"))
    content = check_text(
        "content", raw.get("content"), max_chars=state.ctx.settings.max_content_chars
    )
    created_at = check_time("created_at", raw.get("created_at"))
    source_key = raw.get("source_key")
    if source_key is not None:
        source_key = check_text("source_key", source_key, max_chars=MAX_SOURCE_KEY_CHARS)
    trace_id = raw.get("trace_id")
    if trace_id is not None and not (
        isinstance(trace_id, str) and TRACE_ID_FORM.fullmatch(trace_id)
    ):
        raise InvalidInput(
            f"trace_id={str(trace_id)[:40]!r} is not valid; the form is VT-YYYYMMDD-xxxxxxxx "
            "(8 digits, then 8 lowercase hex digits), e.g. VT-20261130-1a2b3c4d"
        )
    return {
        "turn": {
            "session": session,
            "role": role,
            "content": content,
            "created_at": time.time() if created_at is None else created_at,
            "source_key": source_key,
            "trace_id": trace_id,
            "content_hash": hashlib.sha256(content.encode("utf-8")).hexdigest(),
        }
    }
