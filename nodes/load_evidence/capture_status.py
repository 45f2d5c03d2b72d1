"""Capture status: the watcher holding the store's capture lock, every followed
transcript's cursor (offset, size, counts, last success, last error), and what the
host hooks did last (their errors never reach the host)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from nodes.evaluate_contracts.inputs import iso
from nodes.publish.wording import counted
from store.capture_lock import lock_holder
from store.cursors import cursor_totals, recent_cursors
from store.hook_log import hook_log
from store.sql import Conn

__all__ = ["LISTED_FILES", "capture_summary"]

LISTED_FILES = 20  # most recently updated files listed one by one (the totals cover all)


def _when(seconds: float | None) -> str | None:
    return None if seconds is None else iso(seconds)


def _size(path: str) -> int | None:
    try:
        return os.stat(path).st_size
    except OSError:
        return None  # the host deleted or moved it since


def capture_summary(conn: Conn, data_dir: Path) -> tuple[dict[str, Any], str]:
    """The ``capture`` part of status, and its line of text."""
    totals = cursor_totals(conn)
    files = []
    for c in recent_cursors(conn, LISTED_FILES):
        size = _size(c.name)
        files.append({
            "kind": c.kind, "path": c.name, "offset": c.position, "size": size,
            "pending_bytes": None if size is None else max(size - c.position, 0),
            "lines": c.lines, "captured": c.captured, "duplicates": c.duplicates,
            "skipped": c.skipped, "resets": c.resets,
            "last_success_at": _when(c.last_success_at), "last_error": c.last_error,
            "last_error_at": _when(c.last_error_at)})
    kinds = totals["kinds"]
    sums = {k: sum(v[k] for v in kinds.values())
            for k in ("files", "bytes_read", "captured", "duplicates", "skipped", "resets")}
    holder = lock_holder(data_dir)
    if holder is not None and holder.get("since"):
        holder = {**holder, "since": _when(float(holder["since"]))}
    last_success = max((v["last_success_at"] for v in kinds.values()
                        if v["last_success_at"] is not None), default=None)
    last_error = totals["last_error"]
    if last_error is not None:
        last_error = {**last_error, "at": _when(last_error["at"])}
    capture = {
        "enabled": bool(kinds) or holder is not None,
        "watcher": holder if holder is not None and holder.get("mode") == "watch" else None,
        "running": holder,
        **sums,
        "by_kind": {k: {**v, "last_success_at": _when(v["last_success_at"]),
                        "last_error_at": _when(v["last_error_at"])} for k, v in kinds.items()},
        "last_success_at": _when(last_success),
        "last_error": last_error,
        "sources": files,
        "hooks": _hooks(data_dir),
    }
    return capture, _text(capture)


def _hooks(data_dir: Path) -> dict[str, Any] | None:
    log = hook_log(data_dir)
    if log is None:
        return None
    return {k: None if not isinstance(v, dict) else {**v, "at": _when(v.get("at"))}
            for k, v in log.items() if k in ("last_run", "last_error")}


def _hook_text(h: dict[str, Any] | None) -> str | None:
    if not h or not h.get("last_run"):
        return None
    run = h["last_run"]
    text = (f"hooks: last {run['host']} {run['event']} at {run['at']} "
            f"{'ok' if run['ok'] else 'failed'} ({run['duration_ms']:.0f} ms)")
    error = h.get("last_error")
    if error:
        text += f"; last error at {error['at']} ({error['event']}): {error['error'][:160]}"
    return text


def _text(c: dict[str, Any]) -> str:
    hooks = _hook_text(c["hooks"])
    if not c["enabled"]:
        text = "capture: no transcripts captured yet (stenographer capture --once | --watch)"
        return text if hooks is None else f"{text}; {hooks}"
    who = c["watcher"] or c["running"]
    parts = [f"{who['mode']} pid {who['pid']} since {who['since']}" if who else
             "no watcher running"]
    parts.append(f"{counted(c['files'], 'file')}, {counted(c['captured'], 'turn')} captured, "
                 f"{c['duplicates']} already captured, {counted(c['skipped'], 'line')} skipped")
    if c["last_success_at"]:
        parts.append(f"last success {c['last_success_at']}")
    if c["last_error"]:
        e = c["last_error"]
        parts.append(f"last error {e['at']} in {Path(e['file']).name}: {e['error'][:160]}")
    if hooks is not None:
        parts.append(hooks)
    return "capture: " + "; ".join(parts)
