"""Node: the session a forget request names, as a row id (unknown: an error)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodes.context import State, Writes
from store.errors import NotFound
from store.exchanges import session_row_id

__all__ = ["forget_scope"]


def forget_scope(state: State, cfg: Mapping[str, Any]) -> Writes:
    forget = dict(state.get("forget"))
    row = None
    if forget["session"] is not None:
        with state.ctx.store.read() as conn:
            row = session_row_id(conn, forget["session"])
        if row is None:
            raise NotFound(f"session {forget['session']!r} is not in the store")
    forget["session_row"] = row
    return {"forget": forget}
