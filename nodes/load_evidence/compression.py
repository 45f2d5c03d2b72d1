"""Node: the oldest uncompressed turns of a session, when there are enough to compress."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from nodes.context import RunContext, node
from store.exchanges import Exchange, live_turns
from store.milestones import milestone_ids

__all__ = ["EXCERPT_CHARS", "batch_records", "compression_batch"]

EXCERPT_CHARS = 240  # what a brief may quote of one turn; the turn itself stays stored


def batch_records(turns: Sequence[Exchange], labels: Mapping[int, str]
                  ) -> list[dict[str, Any]]:
    """What a brief is made from, per turn (also used to rebuild a brief after some of
    its sources were forgotten)."""
    return [
        {
            "id": t.id,
            "hash": t.content_hash.hex(),
            "role": t.role,
            "created_at": t.created_at,
            "excerpt": t.content[:EXCERPT_CHARS],
            "decisions": t.decisions,
            "blockers": t.blockers,
            "milestone": labels.get(t.id),
        }
        for t in turns
    ]


class CompressionBatchWrites(TypedDict):
    batch: Any


@node
def compression_batch(session_row: Any, *, run: RunContext) -> CompressionBatchWrites:
    limit = run.settings.turn_limit
    with run.store.read() as conn:
        turns = live_turns(conn, session_row, limit)
        labels = milestone_ids(conn, [t.id for t in turns]) if len(turns) >= limit else {}
    if len(turns) < limit:
        return {"batch": []}
    return {"batch": batch_records(turns, labels)}
