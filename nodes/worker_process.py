"""Starting and ending the worker processes of a bulk run (nodes.turn_worker,
nodes.extract.graph_prefetch).

A worker is a plain ``python -P -c`` child that reads pickled requests on stdin and
writes pickled replies on stdout. (``multiprocessing`` would re-run the parent's main
script in the child, which scripts that embed the app do not expect.) It imports this
package from the directory the parent imported it from: that directory goes first on
its ``PYTHONPATH``, and ``-P`` keeps the working directory off its path (a parent
started inside another checkout of this package would otherwise give the child that
checkout's modules).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO

__all__ = ["CLOSE_TIMEOUT_S", "PIPE_BYTES", "end", "foreign_modules", "package_root", "start"]

CLOSE_TIMEOUT_S = 10.0
# The size asked for each pipe to and from a worker (Linux; elsewhere, and where it is
# refused, the system's). A request is a batch's turns, 0.2-0.8 MB; in a 64 KB pipe the
# sender waits for the worker to read each 64 KB, and while the worker computes the
# request before it, its reading thread gets the interpreter once a switch interval
# (5 ms): an import of 100,000 turns waited 3.3 s of its 18.5 on its sends. 1 MB is the
# most a process without privileges may ask (/proc/sys/fs/pipe-max-size).
PIPE_BYTES = 1 << 20
_TOP = ("constants", "graphs", "nodes", "stenographer", "store")


def package_root() -> str:
    """The directory this package was imported from."""
    return str(Path(__file__).resolve().parents[1])


def start(boot: str, pass_fds: tuple[int, ...] = ()) -> subprocess.Popen[bytes] | None:
    """A worker running the Python statement ``boot`` with this package's code (and the
    file descriptors ``pass_fds``, under the same numbers), or None when it cannot be
    started."""
    path = os.pathsep.join(p for p in (package_root(), os.environ.get("PYTHONPATH")) if p)
    try:
        worker = subprocess.Popen([sys.executable, "-P", "-c", boot],
                                  env=dict(os.environ, PYTHONPATH=path),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  pass_fds=pass_fds)
    except OSError:
        return None
    for pipe in (worker.stdin, worker.stdout):
        _widen(pipe)
    return worker


def _widen(pipe: IO[bytes] | None) -> None:
    """Ask for a pipe of ``PIPE_BYTES``; keep the one there is when that is refused."""
    if pipe is None or sys.platform != "linux":
        return
    import fcntl

    try:
        fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except OSError:  # above the system's limit, or no such pipe: slower, not wrong
        pass


def foreign_modules(root: str) -> list[str]:
    """This package's modules loaded from anywhere but ``root`` (in a worker: code that
    is not its parent's)."""
    return [f"{name} ({module.__file__})" for name, module in list(sys.modules.items())
            if name.split(".")[0] in _TOP and getattr(module, "__file__", None)
            and not Path(str(module.__file__)).resolve().is_relative_to(root)]


def end(worker: subprocess.Popen[bytes], *, kill: bool,
        reader: threading.Thread | None = None) -> None:
    """Close the worker's pipes and wait for it to exit (killed first if ``kill``, or if
    it does not exit in time). ``reader``: a thread reading the worker's output, which
    stays open until that thread has read to its end."""
    if kill:
        worker.kill()
    _close(worker.stdin)
    if reader is None:
        _close(worker.stdout)
    try:
        worker.wait(timeout=CLOSE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait()
    if reader is not None:  # its read ends at the worker's exit
        reader.join(timeout=CLOSE_TIMEOUT_S)
        _close(worker.stdout)


def _close(pipe: IO[bytes] | None) -> None:
    if pipe is not None:
        try:
            pipe.close()
        except OSError:
            pass
