"""Node: the reply of a forget run (counts and ids; never the forgotten text)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict

from nodes.context import RunContext, node
from nodes.publish.wording import counted

__all__ = ["forget_reply"]


def _graph_part(graph: Mapping[str, Any]) -> str:
    """What forgetting did to the GraphRAG graph ('' when no read turn was forgotten)."""
    removed = (f"{counted(graph['entities_removed'], 'entity', 'entities')} and "
               f"{counted(graph['edges_removed'], 'edge')} removed")
    if graph["reset"]:
        return (f"GraphRAG graph reset ({removed}; part of an affected session was passed "
                "over by --since): run `graphrag extract` to rebuild it")
    if not graph["sessions_rederived"]:
        return ""
    return (f"GraphRAG graph re-derived without them in "
            f"{counted(graph['sessions_rederived'], 'session')} ({removed}); communities "
            "cleared until the next `graphrag extract`")


def _rewrite_part(scrubbed: Mapping[str, Any], file: Path | None, vacuum: bool) -> str:
    """Where the forgotten bytes are now: rewritten away, or still in the file and its
    log until the rewrite finishes."""
    if not vacuum:
        return ("file not rewritten (vacuum=false): freed pages are zeroed, the "
                "write-ahead log keeps old pages until its next checkpoint")
    if file is None:  # PostgreSQL: the store has no file of its own
        return ("tables vacuumed (PostgreSQL reclaims the deleted rows; its own files and "
                "write-ahead log are the server's to recycle)")
    if scrubbed["rewrite_pending"]:
        return ("file rewrite pending: another connection holds a read snapshot (or a "
                f"write) that still needs the old pages, so {file.name} and its "
                "write-ahead log keep them until it lets go; the rewrite is retried in "
                "the background (by this process, or by any server on the store) until "
                "it completes (stenographer status shows when)")
    return "file rewritten (VACUUM) and its write-ahead log emptied"


class ForgetReplyWrites(TypedDict):
    reply: Any


@node
def forget_reply(forgotten: Any, scrubbed: Any, forget: Any, *,
                 run: RunContext) -> ForgetReplyWrites:
    gone = forgotten
    count = gone["count"]
    if not count:
        text = "Nothing forgotten: no stored turn matches"
        if gone["milestones_removed"]:
            labels = counted(gone["milestones_removed"], "milestone label")
            text += f" (removed {labels} holding the text)"
    else:
        shown = ", ".join(f"#{i}" for i in gone["ids"][:20])
        text = (f"Forgot {counted(count, 'turn')} in {counted(gone['sessions'], 'session')}: "
                f"{shown}"
                + ("…" if count > 20 else ""))
        parts = []
        if gone["briefs_rebuilt"]:
            parts.append("briefs rebuilt " + ", ".join(map(str, gone["briefs_rebuilt"])))
        if gone["briefs_removed"]:
            parts.append("briefs removed " + ", ".join(map(str, gone["briefs_removed"])))
        if gone["milestones_removed"]:
            parts.append(f"{counted(gone['milestones_removed'], 'milestone')} removed")
        if graph_part := _graph_part(gone["graph"]):
            parts.append(graph_part)
        parts.append("tombstones record their ids and hashes")
        parts.append(_rewrite_part(scrubbed, run.store.file,
                                   forget["vacuum"]))
        text += " | " + "; ".join(parts)
    return {"reply": {"text": text, **gone, **scrubbed}}
