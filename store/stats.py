"""Store-wide counts for status and diagnostics."""

from __future__ import annotations

from typing import Any

from store.footprint import page_stats
from store.sql import Conn, one

__all__ = ["store_counts"]

COUNTS = """
SELECT (SELECT count(*) FROM sessions),
       (SELECT count(*) FROM exchanges),
       (SELECT count(*) FROM exchanges WHERE brief_id IS NULL),
       (SELECT count(*) FROM briefs),
       (SELECT count(*) FROM milestones),
       (SELECT count(*) FROM runs)"""


def store_counts(conn: Conn) -> dict[str, Any]:
    row = one(conn, COUNTS)
    keys = ("sessions", "exchanges", "uncompressed", "briefs", "milestones", "runs")
    out: dict[str, Any] = dict(zip(keys, (int(v) for v in row), strict=True))
    out["database_bytes"] = page_stats(conn).database_bytes
    return out
