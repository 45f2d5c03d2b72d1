"""Audit evidence: what later features derived from a forgotten turn must be gone.

One page of tombstones (by turn id) at a time, each probed by index for rows that still
cite its turn: GraphRAG provenance (``graph_entity_turns``, ``graph_edge_turns``), sync
origins (``turn_origins``) and NAFE flags (``signal_flags``). Bounded by the number of
tombstones, not by the size of the graph.
"""

from __future__ import annotations

from store.audit import Page
from store.sql import Conn, all_rows

__all__ = ["forgotten_page"]

_BEFORE = -(2**63)

SELECT_FORGOTTEN = """
SELECT f.exchange_id,
       (SELECT count(*) FROM graph_entity_turns t WHERE t.exchange_id = f.exchange_id),
       (SELECT count(*) FROM graph_edge_turns t WHERE t.exchange_id = f.exchange_id),
       (SELECT count(*) FROM turn_origins o WHERE o.exchange_id = f.exchange_id),
       (SELECT count(*) FROM signal_flags s WHERE s.exchange_id = f.exchange_id)
FROM forgotten f
WHERE f.exchange_id > ?1 AND (?2 IS NULL OR f.session_id = ?2)
  AND NOT EXISTS(SELECT 1 FROM exchanges x WHERE x.id = f.exchange_id)
ORDER BY f.exchange_id LIMIT ?3"""


def forgotten_page(conn: Conn, after: int | None, limit: int,
                   session_id: int | None) -> Page:
    """``[turn id, entity rows, edge rows, origin rows, flag rows]`` per tombstone."""
    rows = all_rows(conn, SELECT_FORGOTTEN,
                    (_BEFORE if after is None else after, session_id, limit))
    records = [[int(v) for v in row] for row in rows]
    return records, (None if len(rows) < limit else rows[-1][0])
