"""The capture lock: one capture process (watcher, pass or hook) per store at a time.

An advisory lock on ``capture.lock`` beside the database (store.file_lock). The
operating system drops it when the holder exits, however it exits, so a killed watcher
never leaves a stale lock behind. The holder writes who it is (pid, mode, start time)
into the file for status and for the message that a second watcher gets.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import IO, Any

from store.errors import StenoError
from store.file_lock import RETRY_S, held_by_other, open_lock, try_lock, unlock

__all__ = ["LOCK_NAME", "CaptureLock", "CaptureLocked", "lock_holder"]

LOCK_NAME = "capture.lock"


class CaptureLocked(StenoError):
    """Another capture process holds the store's capture lock."""

    code = "steno.capture_locked"
    user_facing = True

    def __init__(self, message: str, holder: dict[str, Any] | None) -> None:
        super().__init__(message)
        self.holder = holder


def _read_holder(path: Path) -> dict[str, Any] | None:
    try:
        text = path.read_text(encoding="utf-8").strip()
        holder = json.loads(text) if text else None
    except (OSError, ValueError):
        return None
    return holder if isinstance(holder, dict) else None


def lock_holder(data_dir: Path) -> dict[str, Any] | None:
    """Who holds the capture lock of this store ({pid, mode, since}), or None."""
    path = data_dir / LOCK_NAME
    if not path.exists() or not held_by_other(path):
        return None
    return _read_holder(path) or {"pid": None, "mode": "unknown", "since": None}


class CaptureLock:
    """``with CaptureLock(data_dir, "watch"):`` holds the lock or raises CaptureLocked.

    ``wait`` seconds: how long to wait for a holder that is not a watcher (a one-off
    pass or a hook finishes in moments; a watcher holds the lock until it stops, so
    waiting for it is pointless and the error comes at once).
    """

    def __init__(self, data_dir: Path, mode: str, wait: float = 0.5) -> None:
        self.path = data_dir / LOCK_NAME
        self.mode = mode
        self.wait = wait
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        f = open_lock(self.path)
        deadline = time.monotonic() + self.wait
        while not try_lock(f):
            holder = _read_holder(self.path)
            if time.monotonic() >= deadline or (holder or {}).get("mode") == "watch":
                f.close()
                raise CaptureLocked(_busy_message(self.path, holder), holder)
            time.sleep(RETRY_S)
        f.seek(0)
        f.truncate()
        f.write(json.dumps({"pid": os.getpid(), "mode": self.mode, "since": time.time()}))
        f.flush()
        self._file = f

    def release(self) -> None:
        f, self._file = self._file, None
        if f is None:
            return
        try:
            f.seek(0)
            f.truncate()
            f.flush()
            unlock(f)
        finally:
            f.close()

    def __enter__(self) -> CaptureLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _busy_message(path: Path, holder: dict[str, Any] | None) -> str:
    who = "another capture process"
    if holder and holder.get("pid"):
        who = f"a capture {holder.get('mode', 'process')} (pid {holder['pid']})"
    return (f"{who} already holds this store's capture lock ({path}); one watcher per "
            "store: stop it first, or let it capture these transcripts")
