"""Nodes: the bookkeeping of a capture pass (graphs/capture), file after file, a batch
of records at a time.

``next_source`` closes the file just read (its report joins the pass's) and opens the
next one; the records of a batch become the turns of an ingest batch
(``capture_items``, nodes.batch); ``cursor_step`` says where the file's cursor moves and
what the batch did; ``file_tally`` adds the batch to the file's report and says whether
to read on. ``file_failed`` reports a file that could not be read, or whose batch the
store could not take (nothing of that batch is stored, its cursor stays: the next pass
reads it again); ``capture_reply`` is the pass's report.
"""

from __future__ import annotations

from typing import Any, TypedDict

from nodes.context import RunContext, node

__all__ = ["capture_items", "capture_reply", "cursor_step", "file_failed", "file_tally",
           "next_source"]


def _fresh(source: dict[str, Any]) -> dict[str, Any]:
    return {"kind": source["kind"], "path": source["path"], "captured": 0, "duplicates": 0,
            "skipped": [], "reset": None, "error": None, "position": 0}


def _stopped(run: RunContext) -> bool:
    stop = run.stop
    return stop is not None and stop.is_set()


class NextSourceWrites(TypedDict):
    reports: Any
    report: Any
    source: Any


@node
def next_source(reports: Any, report: Any, files: Any, *, run: RunContext) -> NextSourceWrites:
    """The next file to read (None: all were read, or a stop was asked), with a fresh
    report; the report of the file before it joins ``reports``."""
    reports, report = list(reports or []), report
    if report is not None:
        reports.append(report)
    if len(reports) >= len(files) or _stopped(run):
        return {"reports": reports, "report": None, "source": None}
    source = files[len(reports)]
    return {"reports": reports, "report": _fresh(source), "source": source}


class CaptureItemsWrites(TypedDict):
    items: Any


@node
def capture_items(batch: Any) -> CaptureItemsWrites:
    """The batch's records as the turns of an ingest batch (with their line and offset)."""
    return {"items": [{"request": r["request"], "line": r["line"], "start": r["start"]}
                      for r in batch["records"]]}


class CursorStepWrites(TypedDict):
    step: Any
    skipped: Any


@node
def cursor_step(source: Any, start: Any, batch: Any, items: Any) -> CursorStepWrites:
    """The file's cursor past the batch, with what the batch did (captured, already
    captured, skipped lines: corrupt ones and those the ingest refused)."""
    source, start, batch = source, start, batch
    end = batch["end"]
    items = [i for i in items if "line" in i]  # records (not bus events)
    skipped = list(batch["skipped"]) + [
        {"line": i["line"], "offset": i["start"], "reason": f"rejected: {i['rejected']}"}
        for i in items if i.get("rejected") is not None]
    skipped.sort(key=lambda s: int(s["line"]))
    duplicates = sum(1 for i in items if i.get("recorded") and i["recorded"]["duplicate"])
    captured = sum(1 for i in items if i.get("recorded")) - duplicates
    problem = f"skipped line {skipped[-1]['line']}: {skipped[-1]['reason']}" if skipped else None
    return {"step": {
        "kind": source["kind"], "name": source["path"], "position": end["position"],
        "lines": end["lines"], "identity": end["identity"], "head": end["head"],
        "session": end["session"], "cwd": end["cwd"], "captured": captured,
        "duplicates": duplicates, "skipped": len(skipped), "resets": 1 if start["reset"] else 0,
        "ok": True, "error": problem}, "skipped": skipped}


class FileTallyWrites(TypedDict):
    report: Any
    again: Any


@node
def file_tally(report: Any, step: Any, start: Any, batch: Any, skipped: Any, *,
               run: RunContext) -> FileTallyWrites:
    """The file's report with this batch added; ``again``: read on (the batch was full,
    or a drained predecessor is followed by its successor), unless a stop was asked."""
    report, step, start = dict(report), step, start
    end = batch["end"]
    report["reset"] = report["reset"] or start["reset"]
    report["captured"] += step["captured"]
    report["duplicates"] += step["duplicates"]
    report["skipped"] = report["skipped"] + skipped
    report["position"] = step["position"]
    drained = start["drain"] and end["position"] > start["position"]
    return {"report": report, "again": (bool(end["more"]) or drained) and not _stopped(run)}


class FileFailedWrites(TypedDict):
    report: Any


@node
def file_failed(report: Any, failures: Any, *, run: RunContext) -> FileFailedWrites:
    """The file's report with the error that stopped it (a watcher tries again later):
    ``failures`` is the failure edges' error channel."""
    failed = failures[-1]["node"]
    messages = run.errors(failed)
    report = dict(report)
    report["error"] = messages[-1] if messages else f"the {failed} stage failed"
    return {"report": report}


class CaptureReplyWrites(TypedDict):
    reply: Any


@node
def capture_reply(reports: Any) -> CaptureReplyWrites:
    return {"reply": {"files": reports or []}}
