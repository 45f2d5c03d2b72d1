"""Advisory locks on a file, across processes: ``flock`` on POSIX, ``msvcrt.locking`` on
Windows. The operating system drops a lock when its holder exits, however it exits, so
a killed process never leaves one behind.

``try_lock`` and ``unlock`` take an open file (store.capture_lock builds its one-holder
capture lock on them); ``held`` waits a while for a lock and holds it for a ``with``
block (a read-modify-write of a small shared file).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

__all__ = ["RETRY_S", "held", "held_by_other", "open_lock", "try_lock", "unlock"]

RETRY_S = 0.05  # between two tries of a lock someone holds


def open_lock(path: Path) -> IO[str]:
    """The lock file at ``path``, opened for reading and writing (made 0600 when
    missing)."""
    return os.fdopen(os.open(path, os.O_RDWR | os.O_CREAT, 0o600), "r+", encoding="utf-8")


if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def try_lock(f: IO[str]) -> bool:
        """Lock ``f`` (exclusive, not waiting); False while another holds it."""
        try:
            f.seek(0)
            msvcrt.locking(f.fileno(), msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

    def unlock(f: IO[str]) -> None:
        f.seek(0)
        msvcrt.locking(f.fileno(), msvcrt.LK_UNLCK, 1)

    def held_by_other(path: Path) -> bool:
        """Whether another process holds the lock on ``path`` now."""
        try:
            with path.open("a+", encoding="utf-8") as f:
                if try_lock(f):
                    unlock(f)
                    return False
                return True
        except OSError:
            return False
else:
    import fcntl

    def try_lock(f: IO[str]) -> bool:
        """Lock ``f`` (exclusive, not waiting); False while another holds it."""
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def unlock(f: IO[str]) -> None:
        fcntl.flock(f.fileno(), fcntl.LOCK_UN)

    def held_by_other(path: Path) -> bool:
        """Whether another process holds the lock on ``path`` now."""
        # A shared probe: it never blocks a holder, and fails only while one exists.
        try:
            with path.open("r", encoding="utf-8") as f:
                try:
                    fcntl.flock(f.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
                except BlockingIOError:
                    return True
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)
                return False
        except OSError:
            return False


@contextmanager
def held(path: Path, wait_s: float) -> Iterator[bool]:
    """Hold the lock on ``path`` (made 0600 when missing) for the block; the block gets
    False, and runs without it, when it was not had within ``wait_s`` or the file cannot
    be opened: the caller decides what it may then do."""
    try:
        f = open_lock(path)
    except OSError:
        yield False
        return
    with f:
        deadline = time.monotonic() + wait_s
        while not (got := try_lock(f)) and time.monotonic() < deadline:
            time.sleep(RETRY_S)
        try:
            yield got
        finally:
            if got:
                unlock(f)
