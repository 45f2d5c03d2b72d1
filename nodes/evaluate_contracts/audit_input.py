"""Node: validate an audit request (the whole store, or one session)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodes.context import State, Writes
from nodes.evaluate_contracts.inputs import check_session_id
from nodes.evaluate_contracts.requests import AuditRequest, parsed

__all__ = ["checked_audit"]


def checked_audit(state: State, cfg: Mapping[str, Any]) -> Writes:
    req = state.get("request") or {}
    session = parsed(AuditRequest, req).session_id
    if session is not None:
        session = check_session_id(session)
    return {"audit": {"session": session}}
