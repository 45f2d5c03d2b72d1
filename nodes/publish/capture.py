"""Node: record where a transcript now stands (its cursor) and what the pass did."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from nodes.context import State, Writes
from store.cursors import CursorAdvance, advance_cursor

__all__ = ["advanced_cursor"]


def advanced_cursor(state: State, cfg: Mapping[str, Any]) -> Writes:
    step = CursorAdvance(**state.get("step"), at=time.time())
    with state.ctx.store.write() as conn:
        cursor = advance_cursor(conn, step)
    return {"cursor": cursor.as_dict()}
