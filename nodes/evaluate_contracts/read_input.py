"""Nodes: validate a read that shows one stored item or a page of them, and say which
(``wanted``: "one" or "list"), so one graph serves both."""

from __future__ import annotations

from typing import Any, TypedDict

from nodes.context import RunContext, node
from nodes.evaluate_contracts.requests import CommunityRequest, TraceRequest, parsed

__all__ = ["checked_community_request", "checked_trace_request"]


class CheckedTraceRequestWrites(TypedDict):
    wanted: Any


@node
def checked_trace_request(request: Any, *, run: RunContext) -> CheckedTraceRequestWrites:
    """One run's trace by ``run_id``, else the recent runs (``limit``, ``graph``)."""
    req = request or {}
    return {"wanted": "list" if parsed(TraceRequest, req).run_id is None else "one"}


class CheckedCommunityRequestWrites(TypedDict):
    wanted: Any


@node
def checked_community_request(request: Any) -> CheckedCommunityRequestWrites:
    """One community by ``community_id``, else a page of communities."""
    req = request or {}
    return {"wanted": "list" if parsed(CommunityRequest, req).community_id is None else "one"}
