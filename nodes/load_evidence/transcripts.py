"""Nodes: where to read a transcript file from, and the next batch of its records.

``transcript_start`` compares the file with its stored cursor: a file that only grew is
read on from the cursor; one that shrank (truncated), changed its first bytes
(rewritten) or its inode (replaced) is read again from the start, after the unread tail
of its rotated predecessor (a file beside it named after it, e.g. ``x.jsonl.1``, with
the old inode or the old first bytes) has been drained. Records read twice are stored
once (their source keys), so a restart from 0 costs reading, never duplicates.

``transcript_batch`` reads whole lines from there, up to a batch size. A line that is
not yet complete (the host is still writing it) is left for the next pass; a corrupt
line is reported and stepped over, so it never holds up the lines after it. The batch
also says which directory the host last worked in, when its records name one.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, TypedDict

from nodes.context import RunContext, node
from nodes.extract.transcripts import CorruptRecord, parse_record, session_from_name
from store.cursors import Cursor, get_cursor
from store.errors import NotFound

__all__ = ["HEAD_BYTES", "MAX_LINE_BYTES", "file_head", "file_identity", "file_start",
           "read_batch", "transcript_batch", "transcript_start"]

HEAD_BYTES = 1024  # the first bytes whose hash tells a rewritten file from a grown one
MAX_LINE_BYTES = 32 * 1024 * 1024  # a longer line is skipped as corrupt
DEFAULT_BATCH_BYTES = 1024 * 1024  # text per batch that travels through graph state


def file_identity(st: os.stat_result) -> str:
    return f"{st.st_dev}:{st.st_ino}"


def file_head(path: Path, upto: int) -> str:
    """sha256 of the file's first ``min(upto, HEAD_BYTES)`` bytes."""
    with path.open("rb") as f:
        return hashlib.sha256(f.read(min(upto, HEAD_BYTES))).hexdigest()


def _moved(cur: Cursor, path: Path, st: os.stat_result) -> str | None:
    """Why the file can no longer be read on from the cursor, or None if it can."""
    if cur.identity is not None and cur.identity != file_identity(st):
        return "replaced"
    if st.st_size < cur.position:
        return "truncated"
    if cur.head is not None and cur.position and file_head(path, cur.position) != cur.head:
        return "rewritten"
    return None


def _rotated(path: Path, cur: Cursor) -> Path | None:
    """The predecessor of ``path`` holding lines after the cursor, if it was rotated."""
    try:
        siblings = sorted(p for p in path.parent.iterdir()
                          if p.name.startswith(path.name) and p.name != path.name)
    except OSError:
        return None
    for sib in siblings:
        try:
            st = sib.stat()
            if not sib.is_file() or st.st_size <= cur.position:
                continue
            if file_identity(st) == cur.identity or (
                    cur.head is not None and file_head(sib, cur.position) == cur.head):
                return sib
        except OSError:
            continue
    return None


def _unreadable(path: str | Path, ex: OSError) -> NotFound:
    return NotFound(f"transcript {path} cannot be read: {ex.strerror or ex}")


class TranscriptStartWrites(TypedDict):
    start: Any


@node
def transcript_start(source: Any, *, run: RunContext) -> TranscriptStartWrites:
    try:
        return {"start": file_start(run, source)}
    except OSError as ex:
        raise _unreadable(source["path"], ex) from None


def file_start(run: RunContext, source: dict[str, Any]) -> dict[str, Any]:
    """Where the file's next batch starts (``transcript_start``): its stored cursor,
    checked against the file as it is now. OSError when the file cannot be read."""
    path = Path(source["path"])
    with run.store.read() as conn:
        cur = get_cursor(conn, source["kind"], str(path))
    return _start(source["kind"], path, cur)


def _start(kind: str, path: Path, cur: Cursor | None) -> dict[str, Any]:
    st = path.stat()
    start: dict[str, Any] = {
        "file": str(path), "position": 0, "lines": 0, "identity": file_identity(st),
        "head": None, "session": session_from_name(kind, path.name), "reset": None,
        "drain": False}
    if cur is None:
        return start
    start["session"] = cur.session or start["session"]
    reason = _moved(cur, path, st)
    if reason is None:
        start.update(position=cur.position, lines=cur.lines, head=cur.head)
        return start
    old = _rotated(path, cur)
    if old is not None:  # finish the old file first; the cursor keeps its identity
        start.update(file=str(old), position=cur.position, lines=cur.lines,
                     identity=cur.identity, head=cur.head, drain=True)
    else:
        start["reset"] = reason
    return start


class TranscriptBatchWrites(TypedDict):
    batch: Any


@node
def transcript_batch(source: Any, start: Any) -> TranscriptBatchWrites:
    try:
        return {"batch": read_batch(source, start)}
    except OSError as ex:
        raise _unreadable(start["file"], ex) from None


def read_batch(source: dict[str, Any], start: dict[str, Any]) -> dict[str, Any]:
    """The file's next batch of records from ``start`` (``transcript_batch``)."""
    kind, session = source["kind"], start["session"]
    records: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    max_records, max_bytes = source["max_records"], DEFAULT_BATCH_BYTES
    lines, taken, more = start["lines"], 0, False
    cwd: str | None = None  # the last working directory a record of the batch names
    with open(start["file"], "rb") as f:
        f.seek(start["position"])
        while True:
            if len(records) >= max_records or taken >= max_bytes:
                more = True
                break
            at = f.tell()
            line = f.readline(MAX_LINE_BYTES + 1)
            if not line:
                break
            if not line.endswith(b"\n"):
                if len(line) > MAX_LINE_BYTES:
                    while (chunk := f.readline(MAX_LINE_BYTES)) and not chunk.endswith(b"\n"):
                        pass
                    lines += 1
                    skipped.append({"line": lines, "offset": at,
                                    "reason": f"longer than {MAX_LINE_BYTES:,} bytes"})
                    continue
                if not start["drain"]:
                    f.seek(at)  # still being written: read it whole next time
                    break
                # the last line of a rotated file will never be finished
            lines += 1
            taken += len(line)
            body = line.rstrip(b"\r\n")
            if not body.strip():
                continue
            try:
                parsed = parse_record(kind, body, session, at)
            except CorruptRecord as ex:
                skipped.append({"line": lines, "offset": at, "reason": str(ex)})
                continue
            session = parsed.session or session
            cwd = parsed.cwd or cwd
            if parsed.turn is not None:
                records.append({"line": lines, "start": at, "end": f.tell(),
                                "request": parsed.turn})
        position = f.tell()
    head = start["head"] if start["drain"] else (
        file_head(Path(start["file"]), position) if position else None)
    end = {"position": position, "lines": lines, "identity": start["identity"],
           "head": head, "session": session, "cwd": cwd, "more": more}
    return {"records": records, "skipped": skipped, "end": end}
