"""What the host hooks did last: ``hooks.json`` beside the database.

A hook must never fail its host, so it exits 0 and prints nothing when something goes
wrong; the error is kept here for ``stenographer status`` instead, in a file of its own
because the store may be the thing that failed (locked, damaged, not there). The file
holds the last run and the last error (each: time, host, event, what happened); a new
run replaces the first, a new error the second. It is replaced whole (write, then
rename), so a reader never sees half a file; two hooks finishing at once may each keep
its own run, the last rename wins.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from store.owner_file import replace_json

__all__ = ["HOOK_LOG", "MAX_ERROR_CHARS", "hook_log", "record_hook"]

HOOK_LOG = "hooks.json"
MAX_ERROR_CHARS = 500


def hook_log(data_dir: Path) -> dict[str, Any] | None:
    """{"last_run": {...}, "last_error": {...} or None}, or None before any hook ran."""
    try:
        found = json.loads((data_dir / HOOK_LOG).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def record_hook(data_dir: Path, *, host: str, event: str, ok: bool, duration_ms: float,
                detail: str | None = None, error: str | None = None) -> None:
    """Record one hook run (and its error). Never raises: the hook's answer to its host
    matters more than this record."""
    run = {"at": time.time(), "host": host, "event": event[:60], "ok": ok,
           "duration_ms": round(duration_ms, 1), "detail": detail,
           "error": None if error is None else error[:MAX_ERROR_CHARS]}
    try:
        before = hook_log(data_dir) or {}
        state = {"last_run": run,
                 "last_error": run if error is not None else before.get("last_error")}
        data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        replace_json(data_dir / HOOK_LOG, state, ensure_ascii=False)
    except OSError:
        pass
