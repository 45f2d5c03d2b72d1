"""Real file systems for the storage-failure tests: a small tmpfs that can be filled,
and a read-only bind mount of a directory. Mounting needs root (CAP_SYS_ADMIN), which
the tests have in CI; elsewhere the first attempt says why and the test is skipped."""

from __future__ import annotations

import errno
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

__all__ = ["fill", "read_only_view", "tmpfs"]

TIMEOUT = 30.0


def _mount(*args: str) -> None:
    """``mount ARGS``; skips the test when this machine does not let it mount."""
    if shutil.which("mount") is None:
        pytest.skip("these tests mount file systems, and there is no `mount` command")
    done = subprocess.run(["mount", *args], capture_output=True, text=True,
                          timeout=TIMEOUT, check=False)
    if done.returncode != 0:
        pytest.skip(f"these tests mount file systems (as root in CI); `mount "
                    f"{' '.join(args)}` failed here: {done.stderr.strip() or done.returncode}")


def _unmount(target: Path) -> None:
    """Unmount even while something still holds a file open there (lazily then)."""
    done = subprocess.run(["umount", str(target)], capture_output=True, timeout=TIMEOUT,
                          check=False)
    if done.returncode != 0:
        subprocess.run(["umount", "-l", str(target)], capture_output=True, timeout=TIMEOUT,
                       check=True)


@contextmanager
def tmpfs(target: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (e.g. "4m") mounted at ``target`` for the block."""
    target.mkdir(parents=True, exist_ok=True)
    _mount("-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(target))
    try:
        yield target
    finally:
        _unmount(target)


@contextmanager
def read_only_view(source: Path, target: Path) -> Iterator[Path]:
    """``source`` seen read-only at ``target`` (a bind mount remounted read-only)."""
    target.mkdir(parents=True, exist_ok=True)
    _mount("--bind", str(source), str(target))
    try:
        _mount("-o", "remount,ro,bind", str(target))
        yield target
    finally:
        _unmount(target)


def fill(directory: Path) -> Path:
    """A file in ``directory`` grown until its file system has no byte left."""
    path = directory / "filler"
    chunk = b"\0" * 4096
    with path.open("wb", buffering=0) as out:
        try:
            while True:
                out.write(chunk)
        except OSError as ex:
            if ex.errno != errno.ENOSPC:  # full, as wanted
                raise
    return path
