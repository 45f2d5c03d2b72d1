"""Nodes: where a copy into the target stands, and the source's next page.

``migration_plan`` reads the target's progress row (store.transfer). None and an empty
target: a new copy, planned from the first table with the source's row counts as
totals. A row naming this source: the copy resumes where it stopped. Anything else is
refused before a byte is written: a target with records of its own, a copy of another
store, vectors of another dimension. The plan is made again before every page: it also
says whether the operator asked to stop (``RunContext.stop``) and, on the run's first
plan, whether this run resumes a copy.
"""

from __future__ import annotations

import json
import time
from typing import Any, TypedDict

from nodes.context import RunContext, node
from store.errors import InvalidInput
from store.neighbours import NEIGHBOUR_CHARS
from store.transfer import (
    TABLES,
    held_records,
    key_of,
    read_page,
    read_progress,
    table_counts,
    turn_evidence,
    vector_dim,
)

__all__ = ["ROWS_PER_TURN", "migration_page", "migration_plan"]

ROWS_PER_TURN = 4  # other tables' rows are small: a page of them is this many times larger


class MigrationPlanWrites(TypedDict):
    progress: Any
    claimed: Any
    resumed: bool
    stopped: bool


@node
def migration_plan(migration: Any, resumed: bool | None, *, run: RunContext) -> MigrationPlanWrites:
    source_name, target_name = migration["source"], migration["target"]
    source = run.source
    assert source is not None  # checked_migration
    with run.store.read() as conn:
        stored = read_progress(conn)
        held = held_records(conn)
        target_dim = vector_dim(conn)
    if stored is not None:
        progress = json.loads(stored)
        if progress["source"] != source_name:
            raise InvalidInput(
                f"the target {target_name} holds a copy of {progress['source']}, not of "
                f"{source_name}; migrate into a new SQLite file or an empty PostgreSQL "
                "database")
        return {"progress": progress, "claimed": stored,
                **_run_flags(run, resumed, True)}
    if any(held.values()):
        tables = ", ".join(name for name, found in held.items() if found)
        raise InvalidInput(
            f"the target {target_name} is not empty (it holds {tables}) and is not a copy "
            f"in progress from {source_name}; nothing was written. Migrate into a new "
            "SQLite file or an empty PostgreSQL database")
    with source.read() as conn:
        source_dim = vector_dim(conn)
        totals = table_counts(conn)
    if source_dim != target_dim:
        raise InvalidInput(
            f"the source's vectors have {source_dim} components, the target's "
            f"{target_dim}: open both with the same vector dimension")
    progress = {"source": source_name, "started_at": time.time(), "finished_at": None,
                "table": TABLES[0].name, "after": None, "copied": {}, "total": totals}
    return {"progress": progress, "claimed": None, **_run_flags(run, resumed, False)}


def _run_flags(run: RunContext, resumed: bool | None, stored: bool) -> _RunFlags:
    """Whether the run resumed a copy (as its first plan found the target), and whether
    a stop was asked."""
    stop = run.stop
    return {"resumed": stored if resumed is None else resumed,
            "stopped": stop is not None and stop.is_set()}


class _RunFlags(TypedDict):
    resumed: bool
    stopped: bool


class MigrationPageWrites(TypedDict):
    rows: Any
    evidence: Any
    page: Any


@node
def migration_page(progress: Any, migration: Any, *, run: RunContext) -> MigrationPageWrites:
    """The next page of the table being copied, read in one snapshot of the source;
    for turns, with what checking and indexing them needs (``TurnEvidence``)."""
    batch = migration["batch"]
    table, after = progress["table"], progress["after"]
    limit = batch if table == "exchanges" else batch * ROWS_PER_TURN
    source = run.source
    assert source is not None
    evidence = None
    with source.read() as conn:
        rows = read_page(conn, table, after, limit)
        if table == "exchanges" and rows:
            evidence = turn_evidence(conn, rows, after, NEIGHBOUR_CHARS)
    return {"rows": rows, "evidence": evidence,
            "page": {"table": table, "rows": len(rows), "complete": len(rows) < limit,
                     "last": key_of(table, rows[-1]) if rows else after}}
