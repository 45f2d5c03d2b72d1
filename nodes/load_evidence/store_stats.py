"""Node: what the store holds and occupies: counts, file sizes, bytes per table, schema."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

from nodes.context import RunContext, node
from nodes.evaluate_contracts.inputs import iso
from store.footprint import applied_migrations, page_stats, table_bytes
from store.migrations import RECORDED
from store.stats import store_counts

__all__ = ["store_stats"]


def _file_bytes(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return None


class StoreStatsWrites(TypedDict):
    stats: Any


@node
def store_stats(*, run: RunContext) -> StoreStatsWrites:
    store = run.store
    store.traces.flush()  # so that `runs` counts this process's recent runs too
    with store.read() as conn:
        counts = store_counts(conn)
        pages = page_stats(conn)
        tables = table_bytes(conn)
        applied = applied_migrations(conn)
    version = max((m.version for m in applied), default=0)
    known = RECORDED[store.dialect]
    files = store.file
    stats = {
        "path": store.location,
        "counts": {k: v for k, v in counts.items() if k != "database_bytes"},
        "size": {
            "database_bytes": pages.database_bytes,
            "file_bytes": None if files is None else _file_bytes(files),
            "wal_bytes": None if files is None else _file_bytes(
                files.with_name(files.name + "-wal")),
            "page_size": pages.page_size,
            "page_count": pages.page_count,
            "free_pages": pages.freelist_count,
        },
        "tables": tables,
        "dbstat": tables is not None,
        "schema": {
            "version": version,
            "expected": len(known),
            "current": version == len(known)
            and all(known.get(m.version) == m.name for m in applied),
            "migrations": [{"version": m.version, "name": m.name,
                            "applied_at": iso(m.applied_at)} for m in applied],
        },
    }
    return {"stats": stats}
