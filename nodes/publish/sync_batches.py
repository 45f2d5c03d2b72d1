"""Nodes: the batch loop of a push or a pull (graphs/sync).

Each batch goes through its own spool file in ``<data dir>/sync``: ``spooled_file``
names a fresh one, ``removed_spool`` deletes it (and a ``.part`` left by a write that
stopped half-way) whatever became of the batch. ``sync_totals`` adds the batch to the
run's totals and says whether to go round again; ``batches_reply`` renders them.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nodes.context import State, Writes
from nodes.publish.sync_cursor import failure_text
from nodes.publish.wording import counted

__all__ = ["batches_reply", "remove_spool", "removed_spool", "spool_path", "spooled_file",
           "sync_totals"]

ERRORS = "failures"  # the error channel of the sync graphs' failure edges


def spool_path(data_dir: Path, prefix: str) -> Path:
    """A fresh name for one bundle's file in ``<data dir>/sync`` (made owner-only): the
    batches of a push (``out``) or a pull (``in``), and the HTTP server's sync endpoints
    (``recv``, ``send``)."""
    folder = Path(data_dir) / "sync"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder / f"{prefix}-{uuid.uuid4().hex}.zst"


def remove_spool(path: Path) -> None:
    """Delete a bundle's file and the ``.part`` a write that stopped half-way left."""
    path.unlink(missing_ok=True)
    path.with_name(path.name + ".part").unlink(missing_ok=True)


def spooled_file(state: State, cfg: Mapping[str, Any]) -> Writes:
    """A fresh file name for this batch's bundle (``prefix``: out or in)."""
    return {"spool": str(spool_path(state.ctx.settings.data_dir, cfg["prefix"]))}


def removed_spool(state: State, cfg: Mapping[str, Any]) -> Writes:
    """Delete this batch's bundle file."""
    remove_spool(Path(state.get("spool")))
    return {}


def _batch(state: State, direction: str) -> tuple[dict[str, int], str] | None:
    """The figures and the line of the batch that just went through, if one did."""
    peer = state.get("peer")
    if direction == "push":
        outgoing, delivery = state.get("outgoing"), state.get("delivery")
        if outgoing["through"] is None:
            return None
        line = (f"Pushed {counted(outgoing['turns'], 'turn')} to {peer['url']} "
                f"({outgoing['bytes']:,} bytes): {delivery['applied']:,} new there, "
                f"{delivery['duplicates']:,} already there")
        return {"records": outgoing["turns"] + outgoing["tombstones"],
                "applied": delivery["applied"], "duplicates": delivery["duplicates"]}, line
    bundle, applied = state.get("bundle"), state.get("applied")
    if bundle["through"] is None:
        return None
    line = (f"Pulled {counted(bundle['turns'], 'turn')} from {peer['url']}: "
            f"{counted(applied['applied'], 'new turn')} stored, {applied['duplicates']:,} "
            f"already here, {applied['relinked']:,} linked after turns this store wrote "
            "meanwhile")
    return {"records": bundle["turns"], "applied": applied["applied"],
            "duplicates": applied["duplicates"]}, line


def sync_totals(state: State, cfg: Mapping[str, Any]) -> Writes:
    """The run's totals with this batch added; ``more`` while batches are left.

    A failure (the failure edge's error channel is not empty) ends the run: the
    retries counted are the network node's failed attempts that were tried again."""
    direction, network = str(cfg["direction"]), str(cfg["network"])
    totals = dict(state.get("totals") or {
        "batches": 0, "records": 0, "applied": 0, "duplicates": 0, "lines": []})
    failures = state.get(ERRORS) or []
    totals["retries"] = len(state.errors(network)) - len(failures)
    totals["ok"], totals["error"], totals["more"] = not failures, None, False
    if failures:
        verb = "Push to" if direction == "push" else "Pull from"
        totals["error"] = f"{verb} {state.get('peer')['url']} failed: " \
                          f"{failure_text(state, ERRORS)}"
        return {"totals": totals}
    batch = _batch(state, direction)
    if batch is not None:
        figures, line = batch
        totals["batches"] += 1
        for key, value in figures.items():
            totals[key] += int(value)
        totals["lines"] = [*totals["lines"], line]
        totals["more"] = True
    return {"totals": totals}


def batches_reply(state: State, cfg: Mapping[str, Any]) -> Writes:
    """What a push or pull did, in total."""
    direction, totals = str(cfg["direction"]), state.get("totals")
    peer = str((state.get("request") or {}).get("url") or "").rstrip("/")
    verb = "Pushed to" if direction == "push" else "Pulled from"
    text = (f"{verb} {peer}: {counted(totals['batches'], 'batch', 'batches')}, "
            f"{counted(totals['applied'], 'new turn')} stored, "
            f"{totals['duplicates']:,} already there")
    if totals["retries"]:
        text += f", {counted(totals['retries'], 'retry', 'retries')}"
    if not totals["ok"]:
        text += f"; stopped: {totals['error']}"
    fields = ("ok", "batches", "records", "applied", "duplicates", "retries", "error")
    return {"reply": {"direction": direction, "peer": peer,
                      **{k: totals[k] for k in fields}, "text": text,
                      "lines": totals["lines"]}}
