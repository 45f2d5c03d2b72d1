"""Node: write the records after an id (of one session, or all) into a bundle file.

Export and a push's outgoing batch are the same thing: ``export.after`` is 0 for a full
export and the destination's cursor for a push; ``export.limit`` bounds a batch. The
records are read in pages from one read snapshot, so the bundle is a consistent cut of
the store however long it takes and memory stays bounded.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, TypedDict

from nodes.bundles import BundleWriter
from nodes.context import RunContext, node
from store.exchanges import session_row_id
from store.migrations import SCHEMA_VERSION
from store.provenance import GENESIS
from store.sync import iter_records, previous_link, record_rows

__all__ = ["PAGE", "exported_bundle", "write_bundle"]

PAGE = 1_000  # records read per statement


def write_bundle(run: RunContext, path: Path, after: int, limit: int | None,
                 session: str | None) -> dict[str, Any]:
    """Write the bundle; returns what it holds (counts, ids, sizes)."""
    started = time.perf_counter()
    scope = {"after": after, "limit": limit, "session": session}
    writer = BundleWriter(path, SCHEMA_VERSION, scope)
    try:
        with run.store.read() as conn:
            session_row = session_row_id(conn, session) if session is not None else None
            if session is not None and session_row is None:
                rows: Any = iter(())
            elif limit is not None:
                rows = iter(record_rows(conn, after, limit, session_row))
            else:
                rows = iter_records(conn, after, None, PAGE, session_row)
            heads: dict[str, bytes] = {}
            for row in rows:
                prev = heads.get(row.session)
                if prev is None:
                    prev = previous_link(conn, row.session, row.id) if row.id > 1 else GENESIS
                writer.add(row, prev)
                heads[row.session] = row.chain_hash
        size = writer.finish()
    except BaseException:
        writer.abort()
        raise
    m = writer.manifest
    return {"path": str(path), "turns": m.turns, "tombstones": m.tombstones,
            "sessions": len(m.sessions), "first_id": m.first_id, "through": m.through,
            "after": after, "bytes": size, "content_bytes": m.content_bytes,
            "seconds": round(time.perf_counter() - started, 3)}


class ExportedBundleWrites(TypedDict):
    exported: Any


@node
def exported_bundle(export: Any, *, run: RunContext) -> ExportedBundleWrites:
    req = export
    return {"exported": write_bundle(run, Path(req["path"]), req["after"], req["limit"],
                                     req["session"])}
