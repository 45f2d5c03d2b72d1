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

from typing import Any, NotRequired, TypedDict

from nodes.batch import EXTRACT, each_turn, previous_after, split_drop, split_finish, split_start
from nodes.context import RunContext, node
from nodes.load_evidence.transcripts import file_start, read_batch

__all__ = ["ahead_taken", "capture_items", "capture_reply", "cursor_step", "file_failed",
           "file_tally", "next_source", "read_ahead"]


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
    ahead: NotRequired[Any]


@node
def next_source(reports: Any, report: Any, files: Any, ahead: Any = None, *,
                run: RunContext) -> NextSourceWrites:
    """The next file to read (None: all were read, or a stop was asked), with a fresh
    report; the report of the file before it joins ``reports``. A batch read ahead is
    kept when it is the next file's first (``read_ahead``), dropped otherwise (one of
    the file before: a stop was asked)."""
    reports, report = list(reports or []), report
    if report is not None:
        reports.append(report)
    done = len(reports) >= len(files) or _stopped(run)
    source = None if done else files[len(reports)]
    if ahead is not None and ahead["source"] != source:
        _drop(run, ahead)
        ahead = None
    return {"reports": reports, "report": None if source is None else _fresh(source),
            "source": source, "ahead": ahead}


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
    ahead: NotRequired[Any]


@node
def file_failed(report: Any, failures: Any, ahead: Any = None, *,
                run: RunContext) -> FileFailedWrites:
    """The file's report with the error that stopped it (a watcher tries again later):
    ``failures`` is the failure edges' error channel. A batch read ahead is dropped."""
    _drop(run, ahead)
    failed = failures[-1]["node"]
    messages = run.errors(failed)
    report = dict(report)
    report["error"] = messages[-1] if messages else f"the {failed} stage failed"
    return {"report": report, "ahead": None}


class CaptureReplyWrites(TypedDict):
    reply: Any


@node
def capture_reply(reports: Any) -> CaptureReplyWrites:
    return {"reply": {"files": reports or []}}


class ReadAheadWrites(TypedDict):
    ahead: Any


@node
def read_ahead(source: Any, start: Any, batch: Any, items: Any, files: Any, reports: Any,
               ahead: Any = None, *, run: RunContext) -> ReadAheadWrites:
    """The batch after this one read now, before this one is stored: the file's next
    when this one was full, else the first of the pass's next file. It is validated and
    redacted, the turns before each read as if this batch were stored
    (``previous_after``), and its per-turn functions (``EXTRACT``) handed to the worker
    process, which computes them while this process stores and compresses this batch.
    ``ahead_taken`` takes it up as the next batch, or drops it. This batch, when it was
    read ahead itself (``ahead``: its per-turn functions still out at the worker), is
    finished once the next is read and validated, so the worker computes it meanwhile.
    Not with a coordination bus (its shutdown events are read batch by batch) nor while
    a rotated file is drained (nor for a next file that starts so)."""
    end = batch["end"]
    if start["drain"] or _stopped(run) or run.bus is not None or run.turn_worker is None:
        return _finished(run, ahead)
    try:
        if end["more"]:
            following = {**start, "position": end["position"], "lines": end["lines"],
                         "head": end["head"], "session": end["session"], "reset": None}
        else:
            after = len(reports or ()) + 1  # the file after this one (``next_source``)
            if after >= len(files):
                return _finished(run, ahead)
            source = files[after]
            following = file_start(run, source)
            if following["drain"]:
                return _finished(run, ahead)
        read = read_batch(source, following)
    except OSError:
        return _finished(run, ahead)  # read again in its turn, which reports it
    taken = capture_items(read)["items"]
    each_turn(run, taken, "checked_turn")
    _finished(run, ahead)
    each_turn(run, taken, "redacted_turn")
    with run.store.read() as conn:
        previous_after(conn, items, taken)
    todo = [i for i in taken if i.get("rejected") is None and not i.get("duplicate")]
    # sent however few its turns (not from nodes.batch.SPLIT_FROM): this process does not
    # wait for the answer, so a small batch costs it only what is sent (files of 8 turns:
    # 1,540-1,754 turns/s with none sent below 16 turns, 1,883-2,180 with every batch's)
    return {"ahead": {"source": source, "start": following, "batch": read, "items": taken,
                      "split": split_start(run, todo, EXTRACT, True)}}


def _finished(run: RunContext, ahead: Any) -> ReadAheadWrites:
    """This batch's per-turn functions finished when it was read ahead (``ahead``: its
    split, carried by ``ahead_taken``); no batch read ahead after it."""
    if ahead is not None:
        split_finish(run, ahead["split"])
    return {"ahead": None}


class AheadTakenWrites(TypedDict):
    ahead: Any
    taken: Any
    batch: NotRequired[Any]
    items: NotRequired[Any]


@node
def ahead_taken(start: Any, ahead: Any, items: Any, *, run: RunContext) -> AheadTakenWrites:
    """The batch read ahead (``read_ahead``) becomes this batch (``taken``: it goes on
    to ``read_ahead``, which finishes its per-turn functions, then to the store), when
    the file's cursor starts where it was read from and the batch before was stored as
    planned (each turn planned stored, none found already stored by another writer
    meanwhile). Otherwise it is dropped and the batch is read again. ``ahead`` then
    carries only its split, still out at the worker."""
    if ahead is None:
        return {"ahead": None, "taken": False}
    planned = [i for i in items or () if i.get("rejected") is None and not i.get("duplicate")]
    as_planned = all(i.get("recorded") and not i["recorded"]["duplicate"] for i in planned)
    if ahead["start"] != start or not as_planned:
        _drop(run, ahead)
        return {"ahead": None, "taken": False}
    return {"ahead": {"split": ahead["split"]}, "taken": True, "batch": ahead["batch"],
            "items": ahead["items"]}


def _drop(run: RunContext, ahead: Any) -> None:
    if ahead is not None:
        split_drop(run, ahead["split"])
