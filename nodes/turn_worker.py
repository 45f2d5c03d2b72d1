"""Half of a large batch's per-turn stages computed in a second process.

The per-turn node functions of a batch that read no store (redaction, decisions and
blockers, NAFE flags, the vector, the keyword fields: ``nodes.batch.OFFLOADED``) are
pure Python over each turn's values, and in one process they take turns on one core
with the batch's write. ``TurnWorker`` hands most of a stage's turns
(``nodes.batch.WORKER_SHARE``) to a worker process (started on first use and kept for
the process's later batches) while this process computes the rest, so a machine with
two free cores computes both at once. The worker runs the same node functions on the
same channel values, with the same settings and patterns, so each turn gets exactly
what this process would give it; a worker that failed or cannot be reached leaves its
part to this process.

The per-turn functions after the turns before each go to it in one request (a chain
of them, ``nodes.batch.EXTRACT``). An import hands it most of a batch's while it writes
the batch before (nodes.publish.bundle_apply), a capture pass most of the next batch's
while it stores this one (nodes.publish.capture_pass); a bulk batch's compression
hands it part of its briefs' text (``brief_draft``), the derived index's first build
most of its entries' fields (nodes.publish.keyword_index).

The worker (started by ``nodes.worker_process``) reads pickled requests on stdin and
writes pickled replies on stdout. It ignores Ctrl-C and ends when its stdin closes:
when the parent closes it or exits (a parent killed by SIGKILL included). It never
opens the store: what a batch stores is written by this process alone.

Measured on bench/scale.py's generated turns (20,000, 2,000 a batch, in process, a
quiet machine of two cores): 2,619-2,906 turns/s with the worker taking half of each
stage's turns, against 1,975 in one process; this process spends 255-330 µs of CPU a
turn and the worker 120-170. What is sent and the worker's start-up cost 10-65 µs a
turn in all (an import of 20,000 turns, bench/sync.py, at load 2-4: 456 µs a turn of
both processes against 391 in one).
"""

from __future__ import annotations

import pickle
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

from nodes import worker_process

if TYPE_CHECKING:
    from nodes.context import RunContext

__all__ = ["TurnWorker", "chained", "reads", "serve"]

_BOOT = "from nodes.turn_worker import serve; serve()"
Channels = list[dict[str, Any]]


def serve(requests: IO[bytes] | None = None, replies: IO[bytes] | None = None) -> None:
    """The worker's loop. The first request is the run context's settings and patterns
    and the directory the parent's package was imported from; each later one
    ``(node name, cfg, [channels of a turn, ...])``, answered by
    ``("ok", [writes of each turn, ...])`` or ``("error", text)``, until the input ends.
    A tuple of names runs those node functions in turn on each turn, each reading what
    those before it wrote; the turn's writes are all of theirs.
    A worker whose code is not the parent's (imported from another directory) ends at
    once: the parent computes every turn itself."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    requests = requests or sys.stdin.buffer
    replies = replies or sys.stdout.buffer
    try:
        settings, patterns, secret_patterns, root = pickle.load(requests)
    except EOFError:
        return
    try:
        from nodes.batch import OFFLOADED
        from nodes.context import RunContext, bulk_allocations, call
    except ImportError as exc:
        print(f"stenographer: the batch worker cannot run this code: {exc}", file=sys.stderr)
        return
    if foreign := worker_process.foreign_modules(root):
        print(f"stenographer: the batch worker imported {foreign[0]} from outside {root}; "
              "the batch is computed in one process", file=sys.stderr)
        return
    # No store: the offloaded node functions read none (nodes.batch.OFFLOADED).
    run = RunContext(store=None, settings=settings, patterns=patterns,  # type: ignore[arg-type]
                     secret_patterns=secret_patterns)
    while True:
        try:
            name, cfg, turns = pickle.load(requests)
        except EOFError:
            return
        try:
            fns = [OFFLOADED[n] for n in ((name,) if isinstance(name, str) else name)]
            with bulk_allocations():
                reply: tuple[str, Any] = ("ok", [chained(call, fns, t, run, cfg)
                                                 for t in turns])
        except Exception as exc:  # reported; the parent computes the half itself
            reply = ("error", f"{type(exc).__name__}: {exc}")
        pickle.dump(reply, replies, protocol=pickle.HIGHEST_PROTOCOL)
        replies.flush()


class TurnWorker:
    """One worker process, asked one stage's half-batch at a time (one caller at a
    time: a lock serialises the runs of a process that share it)."""

    def __init__(self) -> None:
        self._worker: subprocess.Popen[bytes] | None = None
        self._broken = False  # the worker could not start or died: compute in process
        self._lock = threading.Lock()
        self._owner: int | None = None  # the thread whose request the worker holds

    @property
    def pid(self) -> int | None:
        """The worker's process id while it runs."""
        worker = self._worker
        return None if worker is None else worker.pid

    def send(self, run: RunContext, name: str | tuple[str, ...],
             cfg: Mapping[str, Any] | None, turns: Channels) -> bool:
        """Hand ``turns`` (each the channels node ``name`` reads, or the nodes of a tuple
        of names, run in turn) to the worker; False
        when it cannot take them (compute them here then). Every ``send`` that returned
        True is followed by one ``receive``, with the lock held in between. False too
        while the worker computes a request of this thread's not yet received (a
        capture pass's next batch, nodes.publish.capture_pass): this thread computes
        the new one itself instead of waiting for itself."""
        if self._owner == threading.get_ident():
            return False
        self._lock.acquire()
        self._owner = threading.get_ident()
        try:
            worker = None if self._broken else (self._worker or self._start(run))
            if worker is None:
                self._release()
                return False
            assert worker.stdin is not None
            pickle.dump((name, dict(cfg or {}), turns), worker.stdin,
                        protocol=pickle.HIGHEST_PROTOCOL)
            worker.stdin.flush()
        except Exception:  # a pipe closed, the worker gone
            self._lose()
            self._release()
            return False
        return True

    def receive(self) -> list[dict[str, Any]] | None:
        """The writes of each turn of the last ``send``, in order; None when the worker
        failed (compute them here then)."""
        try:
            worker = self._worker
            assert worker is not None and worker.stdout is not None
            status, value = pickle.load(worker.stdout)
        except Exception:  # a pipe closed, the worker gone, a garbled reply
            self._lose()
            return None
        finally:
            self._release()
        return value if status == "ok" else None

    def _release(self) -> None:
        self._owner = None
        self._lock.release()

    def close(self) -> None:
        """End the worker (its input closed: it exits after the request in hand). A
        request of this thread's that a failed run left unreceived is received first."""
        if self._owner == threading.get_ident():
            self.receive()
        with self._lock:
            worker, self._worker = self._worker, None
        if worker is not None:
            worker_process.end(worker, kill=False)

    def _lose(self) -> None:
        """The worker cannot be used again: no half goes to it (called with the lock)."""
        self._broken = True
        worker, self._worker = self._worker, None
        if worker is not None:
            worker_process.end(worker, kill=True)

    def _start(self, run: RunContext) -> subprocess.Popen[bytes] | None:
        worker = worker_process.start(_BOOT)
        if worker is None:
            self._broken = True
            return None
        self._worker = worker
        assert worker.stdin is not None
        pickle.dump((run.settings, run.patterns, run.secret_patterns,
                     worker_process.package_root()), worker.stdin,
                    protocol=pickle.HIGHEST_PROTOCOL)  # a failure: send's, the worker lost
        return worker


def chained(call: Any, fns: Sequence[Any], turn: dict[str, Any], run: Any, cfg: Any
            ) -> dict[str, Any]:
    """What the node functions ``fns`` write, run with ``call`` (nodes.context.call) in
    turn on one turn's channels, each reading what those before it wrote."""
    if len(fns) == 1:
        return dict(call(fns[0], turn, run, cfg))
    state, writes = dict(turn), {}
    for fn in fns:
        out = call(fn, state, run, cfg)
        state.update(out)
        writes.update(out)
    return writes


def reads(turns: Sequence[dict[str, Any]], channels: Sequence[str]) -> Channels:
    """Each turn's values of ``channels`` (what is sent: not the whole item)."""
    return [{c: t[c] for c in channels if c in t} for t in turns]
