"""Node: the session a forget request names, as a row id (unknown: an error)."""

from __future__ import annotations

from typing import Any, TypedDict

from nodes.context import RunContext, node
from store.errors import NotFound
from store.exchanges import session_row_id

__all__ = ["forget_scope"]


class ForgetScopeWrites(TypedDict):
    forget: Any


@node
def forget_scope(forget: Any, *, run: RunContext) -> ForgetScopeWrites:
    forget = dict(forget)
    row = None
    if forget["session"] is not None:
        with run.store.read() as conn:
            row = session_row_id(conn, forget["session"])
        if row is None:
            raise NotFound(f"session {forget['session']!r} is not in the store")
    forget["session_row"] = row
    return {"forget": forget}
