"""Node: validate an audit request (the whole store, or one session)."""

from __future__ import annotations

from typing import Any, TypedDict

from nodes.context import node
from nodes.evaluate_contracts.inputs import check_session_id
from nodes.evaluate_contracts.requests import AuditRequest, parsed

__all__ = ["checked_audit"]


class CheckedAuditWrites(TypedDict):
    audit: Any


@node
def checked_audit(request: Any) -> CheckedAuditWrites:
    req = request or {}
    session = parsed(AuditRequest, req).session_id
    if session is not None:
        session = check_session_id(session)
    return {"audit": {"session": session}}
