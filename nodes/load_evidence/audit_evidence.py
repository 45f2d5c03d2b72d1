"""Nodes: the audit's scope, then its evidence one bounded page at a time.

The audit reads the store in passes (``PASSES``), each a sequence of pages of at most
``batch`` records (node config, default ``AUDIT_BATCH``). ``position`` says which pass
and where in it; the graph loops ``evidence → check`` until no position is left, so a
store of any size is audited in constant memory. Each page is read in its own snapshot.
"""

from __future__ import annotations

from typing import Any, TypedDict

from nodes.context import Cfg, RunContext, node
from nodes.load_evidence.forget_scope import named_session_row
from store.audit import (
    brief_page,
    compression_page,
    index_page,
    milestone_page,
    run_page,
    turn_page,
)
from store.audit_forgotten import forgotten_page

__all__ = ["AUDIT_BATCH", "PASSES", "audit_batch", "audit_scope"]

AUDIT_BATCH = 5_000
PASSES = ("turns", "briefs", "indexes", "milestones", "forgotten", "compression", "runs")


class AuditScopeWrites(TypedDict):
    audit: Any
    position: Any
    pages: Any


@node
def audit_scope(audit: Any, *, run: RunContext) -> AuditScopeWrites:
    """The session's row id (an unknown session is an error, not a clean audit)."""
    settings = run.settings
    audit = {**audit, "session_row": named_session_row(run, audit["session"]),
             "turn_limit": settings.turn_limit, "retention": settings.trace_retention}
    return {"audit": audit, "position": {"pass": PASSES[0], "after": None}, "pages": 0}


class AuditBatchWrites(TypedDict):
    batch: Any
    pages: Any


@node
def audit_batch(audit: Any, position: Any, pages: Any, *, run: RunContext,
                cfg: Cfg) -> AuditBatchWrites:
    name, after, limit = position["pass"], position["after"], int(cfg.get("batch",
                                                                          AUDIT_BATCH))
    session_row = audit["session_row"]
    derived = run.store.audited_keywords() if name == "indexes" else None
    with run.store.read() as conn:
        if name == "turns":
            records, cursor = turn_page(conn, after, limit, session_row)
        elif name == "briefs":
            records, cursor = brief_page(conn, after, limit, session_row)
        elif name == "indexes":
            records, cursor = index_page(conn, after, limit, session_row, derived)
        elif name == "milestones":
            records, cursor = milestone_page(conn, after, limit, session_row)
        elif name == "forgotten":
            records, cursor = forgotten_page(conn, after, limit, session_row)
        elif name == "compression":
            records, cursor = compression_page(conn, after, limit, session_row,
                                               audit["turn_limit"])
        else:
            records, cursor = run_page(conn, audit["retention"])
    return {"batch": {"pass": name, "records": records, "first": after is None,
                      "next": cursor},
            "pages": (pages or 0) + 1}
