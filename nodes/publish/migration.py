"""Nodes: write a copied page into the target, and the reply of a migrate run (the
last page it wrote, the copy's progress).

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

__all__ = ["copied_page", "migration_reply"]

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
    return {"progress": moved, "written": {"table": table, "rows": written,
                                           "turns": written if table == "exchanges" else 0}}


class MigrationReplyWrites(TypedDict):
    reply: Any


@node
def migration_reply(migration: Any, progress: Any, written: Any,
                    resumed: bool) -> MigrationReplyWrites:
    written = written or {"table": None, "rows": 0, "turns": 0}
    return {"reply": {
        "source": migration["source"], "target": migration["target"],
        "table": written["table"], "rows": written["rows"], "turns": written["turns"],
        "done": progress["table"] is None, "resumed": resumed,
        "copied": progress["copied"], "total": progress["total"],
        "started_at": progress["started_at"], "finished_at": progress["finished_at"]}}
