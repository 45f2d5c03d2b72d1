"""Nodes: the replies of export, import, push and pull (a line of text and the figures)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodes.context import State, Writes
from nodes.publish.wording import counted

__all__ = ["export_reply", "import_reply", "pull_reply", "push_reply"]


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


def pull_reply(state: State, cfg: Mapping[str, Any]) -> Writes:
    peer, delivery = state.get("peer"), state.get("delivery")
    if not delivery["ok"]:
        return {"reply": {"text": f"Pull from {peer['url']} failed: {delivery['error']}",
                          "ok": False, "retryable": delivery["retryable"], "more": False,
                          "cursor": state.get("cursor")}}
    r = _applied(state)
    text = (f"Pulled {counted(r['bundle_turns'], 'turn')} from {peer['url']}: "
            f"{_applied_text(r)}")
    return {"reply": {"text": text, "ok": True, "more": r["through"] is not None,
                      "cursor": state.get("cursor"), **r}}


def push_reply(state: State, cfg: Mapping[str, Any]) -> Writes:
    peer, outgoing, delivery = state.get("peer"), state.get("outgoing"), state.get("delivery")
    if outgoing["through"] is None:
        return {"reply": {"text": f"Nothing to push to {peer['url']}: it has every turn",
                          "ok": True, "more": False, "sent": 0}}
    if not delivery["ok"]:
        return {"reply": {"text": f"Push to {peer['url']} failed: {delivery['error']}",
                          "ok": False, "retryable": delivery["retryable"], "more": False,
                          "cursor": state.get("cursor")}}
    text = (f"Pushed {counted(outgoing['turns'], 'turn')} to {peer['url']} "
            f"({outgoing['bytes']:,} bytes): {delivery['applied']:,} new there, "
            f"{delivery['duplicates']:,} already there")
    return {"reply": {"text": text, "ok": True, "more": True, "sent": outgoing["turns"],
                      "records": outgoing["turns"] + outgoing["tombstones"],
                      "applied": delivery["applied"], "duplicates": delivery["duplicates"],
                      "bytes": outgoing["bytes"], "cursor": state.get("cursor")}}
