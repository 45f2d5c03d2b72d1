"""Forgetting, GraphRAG part (run in the forget transaction, before the turns go).

In each session whose read turns include a forgotten one, every run of forgotten turns
is re-derived locally with the extraction's own ``batch_records``: the records of the
range from the turn before the run to the second turn after it (window: the turn before
the range) are subtracted, and those of the range's remaining turns written back. The
graph then equals a full rebuild on the remaining turns, communities aside (cleared,
recomputed by the next ``graphrag extract``). store.forget_graph explains why, and the
one case (turns passed over by ``--since``) where the whole graph is reset instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nodes.extract.graph_records import batch_records
from store.forget_graph import (
    affected_graph_sessions,
    read_ids,
    read_turn_ids,
    set_cursor,
    settle,
    subtract_page,
    turns_by_ids,
    uncount_turns,
)
from store.graph_batches import PendingTurn, reset_graph, write_batch
from store.sql import Conn

__all__ = ["PAGE_TURNS", "forget_graph", "ranges"]

PAGE_TURNS = 500  # turns re-extracted at a time (their text is held only for the page)


def ranges(ids: Sequence[int], forgotten: set[int]) -> tuple[list[tuple[int, int]], set[int]]:
    """Positions ``(first, last)`` in ``ids`` (a session's read turns) to re-derive, and
    the turns whose provenance rows change: each run of forgotten turns with the turn
    before it and the one after it (their window neighbours change); the range reaches
    one turn further, whose window observation writes a row for the turn after the run.
    Overlapping ranges are merged (each turn is subtracted once)."""
    out: list[tuple[int, int]] = []
    rewritten: set[int] = set()
    position, last = 0, len(ids) - 1
    while position <= last:
        if ids[position] not in forgotten:
            position += 1
            continue
        end = position
        while end < last and ids[end + 1] in forgotten:
            end += 1
        rewritten.update(ids[max(position - 1, 0):min(end + 1, last) + 1])
        low, high = max(position - 1, 0), min(end + 2, last)
        if out and low <= out[-1][1]:
            out[-1] = (out[-1][0], high)
        else:
            out.append((low, high))
        position = end + 1
    return out, rewritten


def _rederive_session(conn: Conn, session_id: int, through: int,
                      forgotten: set[int], keys: set[str]) -> bool:
    """Re-derive the session's ranges; False when a turn was passed over (reset)."""
    ids = read_ids(conn, session_id, through)
    spans, rewritten = ranges(ids, forgotten)
    read = 0
    for low, high in spans:
        window: PendingTurn | None = turns_by_ids(conn, [ids[low - 1]])[0] if low else None
        kept_window = window  # the window of the remaining turns
        for start in range(low, high + 1, PAGE_TURNS):
            page = turns_by_ids(conn, ids[start:min(start + PAGE_TURNS, high + 1)])
            old = batch_records(page, {session_id: window})
            if {x for _, x, _ in old.entity_turns} - read_turn_ids(conn, [t.id for t in page]):
                return False  # it names entities yet was never read: passed over
            subtract_page(conn, old, [t.id for t in page if t.id in rewritten])
            remaining = [t for t in page if t.id not in forgotten]
            new = batch_records(remaining, {session_id: kept_window})
            write_batch(conn, new)
            for records in (old, new):
                keys.update(k for k, _, _ in records.aliases)
                keys.update(k for a, b, _ in records.edges for k in (a, b))
            read += len(page)
            window, kept_window = page[-1], (remaining[-1] if remaining else kept_window)
    uncount_turns(conn, read)
    kept_ids = [i for i in ids if i not in forgotten]
    set_cursor(conn, session_id, kept_ids[-1] if kept_ids else None)
    return True


def forget_graph(conn: Conn, turns: Sequence[tuple[int, int]]) -> dict[str, Any]:
    """Take back what the graph derived from the sessions of ``turns`` ((exchange id,
    session id), still stored). Call inside the forget's write transaction."""
    sessions = affected_graph_sessions(conn, turns)
    out: dict[str, Any] = {"sessions_rederived": len(sessions), "entities_removed": 0,
                           "edges_removed": 0, "reset": False}
    if not sessions:
        return out
    keys: set[str] = set()
    forgotten = {exchange_id for exchange_id, _ in turns}
    for session_id, through in sessions:
        if not _rederive_session(conn, session_id, through, forgotten, keys):
            counts = reset_graph(conn)
            return {"sessions_rederived": 0, "entities_removed": counts["entities"],
                    "edges_removed": counts["edges"], "reset": True}
    out.update(settle(conn, keys))
    return out
