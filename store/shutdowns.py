"""CLAEG terminal-shutdown turns in the store: the system turns recorded from the
coordination bus, found by their source keys (``claeg:<event id>:<digest>``)."""

from __future__ import annotations

from store.sql import Conn, one

__all__ = ["count_shutdown_turns"]

# A range over the unique source-key index: every key that starts with "claeg:".
COUNT_SHUTDOWN_TURNS = """
SELECT count(*) FROM exchanges WHERE source_key >= 'claeg:' AND source_key < 'claeg;'"""


def count_shutdown_turns(conn: Conn) -> int:
    count: int = one(conn, COUNT_SHUTDOWN_TURNS)[0]
    return count
