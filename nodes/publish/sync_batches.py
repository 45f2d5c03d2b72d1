"""Nodes: the batch loop of a push or a pull (graphs/sync).

Each batch goes through its own spool file in ``<data dir>/sync``: ``spooled_file``
names a fresh one, ``removed_spool`` deletes it (and a ``.part`` left by a write that
stopped half-way) whatever became of the batch. ``sync_totals`` adds the batch to the
run's totals and says whether to go round again; ``batches_reply`` renders them.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, TypedDict

from nodes.context import Cfg, NoWrites, RunContext, node
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


class SpooledFileWrites(TypedDict):
    spool: Any


@node
def spooled_file(*, run: RunContext, cfg: Cfg) -> SpooledFileWrites:
    """A fresh file name for this batch's bundle (``prefix``: out or in)."""
    return {"spool": str(spool_path(run.settings.data_dir, cfg["prefix"]))}


@node
def removed_spool(spool: Any) -> NoWrites:
    """Delete this batch's bundle file."""
    remove_spool(Path(spool))
    return {}


def _batch(peer: dict[str, Any], outgoing: Any, delivery: Any, bundle: Any, applied: Any
           ) -> tuple[dict[str, int], str] | None:
    """The figures and the line of the batch that just went through, if one did: a
    push's ``outgoing`` and ``delivery``, or a pull's ``bundle`` and ``applied``."""
    if outgoing is not None:
        if outgoing["through"] is None:
            return None
        line = (f"Pushed {counted(outgoing['turns'], 'turn')} to {peer['url']} "
                f"({outgoing['bytes']:,} bytes): {delivery['applied']:,} new there, "
                f"{delivery['duplicates']:,} already there")
        return {"records": outgoing["turns"] + outgoing["tombstones"],
                "applied": delivery["applied"], "duplicates": delivery["duplicates"]}, line
    if bundle["through"] is None:
        return None
    line = (f"Pulled {counted(bundle['turns'], 'turn')} from {peer['url']}: "
            f"{counted(applied['applied'], 'new turn')} stored, {applied['duplicates']:,} "
            f"already here, {applied['relinked']:,} linked after turns this store wrote "
            "meanwhile")
    return {"records": bundle["turns"], "applied": applied["applied"],
            "duplicates": applied["duplicates"]}, line


class SyncTotalsWrites(TypedDict):
    totals: Any


@node
def sync_totals(totals: Any, peer: Any, failures: Any, outgoing: Any = None, delivery: Any = None,
                bundle: Any = None, applied: Any = None, *, run: RunContext, cfg: Cfg
                ) -> SyncTotalsWrites:
    """The run's totals with this batch added; ``more`` while batches are left.

    A failure (the failure edge's error channel is not empty) ends the run: the
    retries counted are the network node's failed attempts that were tried again. A
    push graph has ``outgoing`` and ``delivery``, a pull graph ``bundle`` and ``applied``."""
    direction, network = str(cfg["direction"]), str(cfg["network"])
    totals = dict(totals or {
        "batches": 0, "records": 0, "applied": 0, "duplicates": 0, "lines": []})
    failures = failures or []
    totals["retries"] = len(run.errors(network)) - len(failures)
    totals["ok"], totals["error"], totals["more"] = not failures, None, False
    if failures:
        verb = "Push to" if direction == "push" else "Pull from"
        totals["error"] = f"{verb} {peer['url']} failed: " \
                          f"{failure_text(run, failures)}"
        return {"totals": totals}
    batch = _batch(peer, outgoing, delivery, bundle, applied)
    if batch is not None:
        figures, line = batch
        totals["batches"] += 1
        for key, value in figures.items():
            totals[key] += int(value)
        totals["lines"] = [*totals["lines"], line]
        totals["more"] = True
    return {"totals": totals}


class BatchesReplyWrites(TypedDict):
    reply: Any


@node
def batches_reply(totals: Any, request: Any, *, cfg: Cfg) -> BatchesReplyWrites:
    """What a push or pull did, in total."""
    direction = str(cfg["direction"])
    peer = str((request or {}).get("url") or "").rstrip("/")
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
