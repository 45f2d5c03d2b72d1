"""Nodes: validate a read that shows one stored item or a page of them, and say which
(``wanted``: "one" or "list"), so one graph serves both."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodes.context import State, Writes
from nodes.evaluate_contracts.requests import CommunityRequest, TraceRequest, parsed

__all__ = ["checked_community_request", "checked_trace_request"]


def checked_trace_request(state: State, cfg: Mapping[str, Any]) -> Writes:
    """One run's trace by ``run_id``, else the recent runs (``limit``, ``graph``)."""
    req = state.get("request") or {}
    return {"wanted": "list" if parsed(TraceRequest, req).run_id is None else "one"}


def checked_community_request(state: State, cfg: Mapping[str, Any]) -> Writes:
    """One community by ``community_id``, else a page of communities."""
    req = state.get("request") or {}
    return {"wanted": "list" if parsed(CommunityRequest, req).community_id is None else "one"}
