"""Node: the session a forget request names, as a row id (unknown: an error)."""

from __future__ import annotations

from typing import Any, TypedDict

from nodes.context import RunContext, node
from store.errors import NotFound
from store.exchanges import session_row_id

__all__ = ["forget_scope", "named_session_row"]


def named_session_row(run: RunContext, session: str | None) -> int | None:
    """The row id of the session a request names (None: it names none); an unknown
    session is an error, not an empty result."""
    if session is None:
        return None
    with run.store.read() as conn:
        row = session_row_id(conn, session)
    if row is None:
        raise NotFound(f"session {session!r} is not in the store")
    return row


class ForgetScopeWrites(TypedDict):
    forget: Any


@node
def forget_scope(forget: Any, *, run: RunContext) -> ForgetScopeWrites:
    return {"forget": {**forget, "session_row": named_session_row(run, forget["session"])}}
