"""Nodes: the replies of export and import (a line of text and the figures); push and
pull reply from nodes.publish.sync_batches."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodes.context import State, Writes
from nodes.publish.wording import counted

__all__ = ["export_reply", "import_reply"]


def export_reply(state: State, cfg: Mapping[str, Any]) -> Writes:
    e = state.get("exported")
    ratio = f" ({e['bytes'] / e['content_bytes']:.0%} of the text)" if e["content_bytes"] else ""
    text = (f"Exported {counted(e['turns'], 'turn')} and {counted(e['tombstones'], 'tombstone')}"
            f" of {counted(e['sessions'], 'session')} to {e['path']}: {e['bytes']:,} bytes"
            f"{ratio} in {e['seconds']:.2f} s")
    return {"reply": {"text": text, **e}}


def _applied(state: State) -> dict[str, Any]:
    b, a = state.get("bundle"), state.get("applied")
    return {"bundle_turns": b["turns"], "tombstones": b["tombstones"],
            "sessions": b["sessions"], "through": b["through"], "applied": a["applied"],
            "duplicates": a["duplicates"], "relinked": a["relinked"],
            "tombstones_applied": a["tombstones"],
            "seconds": a["seconds"],
            "sessions_compressed": int(state.get("sessions_compressed") or 0)}


def _applied_text(r: dict[str, Any]) -> str:
    return (f"{counted(r['applied'], 'new turn')} stored, {r['duplicates']:,} already here, "
            f"{r['relinked']:,} linked after turns this store wrote meanwhile")


def import_reply(state: State, cfg: Mapping[str, Any]) -> Writes:
    r = _applied(state)
    text = (f"Imported {state.get('incoming')['path']}: {counted(r['bundle_turns'], 'turn')} "
            f"in {counted(r['sessions'], 'session')} verified; {_applied_text(r)} "
            f"({r['seconds']:.2f} s)")
    return {"reply": {"text": text, **r}}
