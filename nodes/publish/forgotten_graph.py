"""Forgetting, GraphRAG part (run in the forget transaction, before the turns go).

Each session whose read turns include a forgotten one is re-derived page by page with
the extraction's own ``batch_records``: the records of all its read turns (the window of
a page is the last turn of the page before) are subtracted and those of its remaining
turns written back, so the graph at once equals a full rebuild on the remaining turns,
communities aside (cleared and recomputed by the next ``graphrag extract``).
store.forget_graph explains why, and the one case (turns passed over by ``--since``)
where the whole graph is reset instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apsw

from nodes.extract.graph_records import batch_records
from store.forget_graph import (
    affected_graph_sessions,
    read_turn_ids,
    reset_cursor,
    session_page,
    settle,
    subtract_page,
    uncount_turns,
)
from store.graph_batches import PendingTurn, reset_graph, write_batch

__all__ = ["PAGE_TURNS", "forget_graph"]

PAGE_TURNS = 500  # turns re-extracted at a time (their text is held only for the page)


def _rederive_session(conn: apsw.Connection, session_id: int, through: int,
                      forgotten: set[int], keys: set[str]) -> bool:
    """Subtract the session's records and write back those of its remaining turns;
    False when a turn was passed over (then nothing here is consistent: reset)."""
    reset_cursor(conn, session_id)
    previous: PendingTurn | None = None  # the window over all read turns
    kept_previous: PendingTurn | None = None  # and over the remaining ones
    after, read = 0, 0
    while page := session_page(conn, session_id, after, through, PAGE_TURNS):
        ids = [t.id for t in page]
        records = batch_records(page, {session_id: previous})
        if {x for _, x, _ in records.entity_turns} - read_turn_ids(conn, ids):
            return False  # it names entities yet was never read: passed over
        keys.update(k for k, _, _ in records.aliases)
        keys.update(k for a, b, _ in records.edges for k in (a, b))
        subtract_page(conn, records, ids)
        remaining = [t for t in page if t.id not in forgotten]
        if remaining:
            write_batch(conn, batch_records(remaining, {session_id: kept_previous}))
            kept_previous = remaining[-1]
        read += len(page)
        previous, after = page[-1], page[-1].id
    uncount_turns(conn, read)
    return True


def forget_graph(conn: apsw.Connection, turns: Sequence[tuple[int, int]]) -> dict[str, Any]:
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
