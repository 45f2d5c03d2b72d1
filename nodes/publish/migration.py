"""Nodes: write a copied page into the target, the copy's summary (the last page it
wrote, the copy's progress), and the reply of a migrate run (the summary and the audit
of the target).

``copied_page`` writes the page and moves the progress row in one transaction of the
target (store.transfer): a copy interrupted at any moment resumes after the last page
that committed, and a page is never written twice. The first page drops the target's
keyword index (PostgreSQL's GIN: built once at the end instead of grown at every
insert); after the last table, the target's id sequences are set past every copied id
and tombstone, the index is built, and the copy is marked done.
"""

from __future__ import annotations

import time
from typing import Any, TypedDict

from nodes.context import RunContext, node
from nodes.publish.audit_report import AuditSummary
from store.errors import StoreError
from store.transfer import (
    TABLES,
    claim_target,
    defer_indexes,
    finish_target,
    save_progress,
    write_page,
    write_turns,
)

__all__ = ["MigrateReply", "MigrationSummary", "copied_page", "migrate_reply",
           "migration_reply"]

_NEXT = {t.name: (TABLES[i + 1].name if i + 1 < len(TABLES) else None)
         for i, t in enumerate(TABLES)}


class CopiedPageWrites(TypedDict):
    progress: Any
    written: Any


@node
def copied_page(progress: Any, claimed: Any, page: Any, rows: Any, fields: Any, evidence: Any, *,
                run: RunContext) -> CopiedPageWrites:
    table = page["table"]
    with run.store.write() as conn:
        if claimed is None:
            progress = {**progress, "deferred": defer_indexes(conn)}
            claimed = claim_target(conn, progress)
        if table == "exchanges" and rows:
            written = write_turns(conn, rows, fields, evidence.vectors)
        else:
            written = write_page(conn, table, rows)
        copied = dict(progress["copied"])
        copied[table] = copied.get(table, 0) + written
        after = None if page["complete"] else page["last"]
        following = _NEXT[table] if page["complete"] else table
        moved = {**progress, "table": following, "after": after, "copied": copied}
        if following is None:
            finish_target(conn, progress["deferred"])
            moved["finished_at"] = time.time()
        if not save_progress(conn, claimed, moved):
            raise StoreError("another `stenographer migrate` is copying into this target at "
                             "the same time; this page was not written")
    if following is None:  # the whole store copied: as after any bulk write
        run.store.after_bulk_write()
    return {"progress": moved, "written": {"table": table, "rows": written,
                                           "turns": written if table == "exchanges" else 0}}


class MigrationSummary(TypedDict):
    """Where a copy stands after this run's pages: the stores, the last page written
    (its table, rows and turns), whether the copy is done or resumed an earlier one,
    rows copied and to copy per table, and when it started and finished."""

    source: str
    target: str
    table: str | None
    rows: int
    turns: int
    done: bool
    resumed: bool
    copied: dict[str, int]
    total: dict[str, int]
    started_at: float | None
    finished_at: float | None


class MigrationReplyWrites(TypedDict):
    migrated: MigrationSummary


@node
def migration_reply(migration: dict[str, Any], progress: dict[str, Any],
                    written: dict[str, Any] | None, resumed: bool) -> MigrationReplyWrites:
    written = written or {"table": None, "rows": 0, "turns": 0}
    return {"migrated": MigrationSummary(
        source=migration["source"], target=migration["target"],
        table=written["table"], rows=written["rows"], turns=written["turns"],
        done=progress["table"] is None, resumed=resumed,
        copied=progress["copied"], total=progress["total"],
        started_at=progress["started_at"], finished_at=progress["finished_at"])}


class MigrateReply(MigrationSummary):
    """The migrate graph's output: the copy's summary and, when the copy is done, the
    audit of the target (None when it stopped before)."""

    audit: AuditSummary | None


class MigrateReplyWrites(TypedDict):
    reply: MigrateReply


@node
def migrate_reply(migrated: MigrationSummary, report: AuditSummary | None
                  ) -> MigrateReplyWrites:
    return {"reply": MigrateReply(**migrated, audit=report)}
