"""Nodes: the replies of export and import (a line of text and the figures); push and
pull reply from nodes.publish.sync_batches."""

from __future__ import annotations

from typing import Any, TypedDict

from nodes.context import node
from nodes.publish.wording import counted

__all__ = ["export_reply", "import_reply"]


class ExportReplyWrites(TypedDict):
    reply: Any


@node
def export_reply(exported: Any) -> ExportReplyWrites:
    e = exported
    ratio = f" ({e['bytes'] / e['content_bytes']:.0%} of the text)" if e["content_bytes"] else ""
    text = (f"Exported {counted(e['turns'], 'turn')} and {counted(e['tombstones'], 'tombstone')}"
            f" of {counted(e['sessions'], 'session')} to {e['path']}: {e['bytes']:,} bytes"
            f"{ratio} in {e['seconds']:.2f} s")
    return {"reply": {"text": text, **e}}


def _applied(b: dict[str, Any], a: dict[str, Any], sessions_compressed: int | None
             ) -> dict[str, Any]:
    return {"bundle_turns": b["turns"], "tombstones": b["tombstones"],
            "sessions": b["sessions"], "through": b["through"], "applied": a["applied"],
            "duplicates": a["duplicates"], "relinked": a["relinked"],
            "tombstones_applied": a["tombstones"],
            "seconds": a["seconds"],
            "sessions_compressed": int(sessions_compressed or 0)}


def _applied_text(r: dict[str, Any]) -> str:
    return (f"{counted(r['applied'], 'new turn')} stored, {r['duplicates']:,} already here, "
            f"{r['relinked']:,} linked after turns this store wrote meanwhile")


class ImportReplyWrites(TypedDict):
    reply: Any


@node
def import_reply(incoming: Any, bundle: Any, applied: Any, sessions_compressed: Any = None
                 ) -> ImportReplyWrites:
    r = _applied(bundle, applied, sessions_compressed)
    text = (f"Imported {incoming['path']}: {counted(r['bundle_turns'], 'turn')} "
            f"in {counted(r['sessions'], 'session')} verified; {_applied_text(r)} "
            f"(applied in {r['seconds']:.2f} s; verification, compression and a first "
            "keyword-index build are not counted)")
    return {"reply": {"text": text, **r}}
