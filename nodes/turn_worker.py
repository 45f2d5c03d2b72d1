"""A large batch's per-turn stages computed by two processes at once.

The per-turn node functions of a batch that read no store (redaction, decisions and
blockers, NAFE flags, the vector, the keyword fields: ``nodes.batch.OFFLOADED``) are
pure Python over each turn's values, and in one process they take turns on one core
with the batch's write. ``TurnWorker`` hands a stage's turns to a worker process
(started on first use and kept for the process's later batches), which computes them
from the first while this process computes them from the last (``take_last``), until
the two meet: each side takes the next turn only while the other has not taken it
(``Claims``), so neither waits for the other's share however busy its core is, and a
request sent ahead of this process's other work (a capture pass's next batch, an
import's) is mostly done by the worker by the time this process comes to it. The
worker runs the same node functions on the same channel values, with the same
settings and patterns, so each turn gets exactly what this process would give it; a
worker that failed or cannot be reached leaves its turns to this process.

The per-turn functions after the turns before each go to it in one request (a chain
of them, ``nodes.batch.EXTRACT``). An import sends it a batch's queued behind the
batch before's, then finishes and writes that one (nodes.publish.bundle_apply), a
capture pass the next batch's while it stores this one
(nodes.publish.capture_pass); a bulk batch's compression sends it its briefs' text
(``brief_draft``), the derived index's first build its entries (``keyword_columns``,
nodes.publish.keyword_index).

The worker (started by ``nodes.worker_process``) reads pickled requests on stdin and
writes pickled replies on stdout, the turns it computed (the first of the request's,
in order). It ignores Ctrl-C and ends when its stdin closes:
when the parent closes it or exits (a parent killed by SIGKILL included). It never
opens the store: what a batch stores is written by this process alone.
"""

from __future__ import annotations

import collections
import mmap
import os
import pickle
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

from nodes import worker_process

if TYPE_CHECKING:
    from nodes.context import RunContext

__all__ = ["TurnWorker", "chained", "reads", "serve"]

_BOOT = "from nodes.turn_worker import serve; serve()"
Channels = list[dict[str, Any]]


class Claims:
    """How many turns of a request each process has taken: the worker from the first
    (``FRONT``), this process from the last (``BACK``), two integers a request in a page
    both map (``SLOTS`` requests may be out at once, each in its own slot). Each writes
    its own counter only, and takes its next turn only while that turn is not past the
    other's: the two meet wherever their speeds put them. A counter read before the
    other's last write only lets both take the same turn (it is computed twice, to the
    same result), never leaves a turn to neither."""

    FRONT, BACK = 0, 1
    SLOTS = 2

    def __init__(self, fd: int) -> None:
        self._map = mmap.mmap(fd, mmap.PAGESIZE)
        self._view = memoryview(self._map)
        self._ints = self._view.cast("i")

    @staticmethod
    def make() -> int | None:
        """The descriptor of a new page's file to share with a worker (to be closed
        once the worker and a ``Claims`` hold it), or None where descriptors cannot be
        passed to a child (Windows: the worker then computes every turn it is sent)."""
        if sys.platform == "win32":  # pragma: no cover - no pass_fds there
            return None
        if hasattr(os, "memfd_create"):
            fd = os.memfd_create("steno-claims")
        else:  # pragma: no cover - macOS
            fd, path = tempfile.mkstemp(prefix="steno-claims-")
            os.unlink(path)
        os.ftruncate(fd, mmap.PAGESIZE)
        return fd

    def reset(self, slot: int) -> None:
        """Nothing taken of a new request in ``slot`` (the worker holds none there)."""
        self._ints[2 * slot + self.FRONT] = self._ints[2 * slot + self.BACK] = 0

    def take_first(self, slot: int, index: int, count: int) -> bool:
        """The worker takes turn ``index`` of ``count`` unless this process has."""
        if index >= count - self._ints[2 * slot + self.BACK]:
            return False
        self._ints[2 * slot + self.FRONT] = index + 1
        return True

    def take_last(self, slot: int, count: int) -> int | None:
        """This process takes the last turn of ``count`` not taken yet: its index, or
        None when the worker has taken it."""
        back = self._ints[2 * slot + self.BACK]
        index = count - 1 - back
        if index < self._ints[2 * slot + self.FRONT]:
            return None
        self._ints[2 * slot + self.BACK] = back + 1
        return index

    def take_all(self, slot: int, count: int) -> None:
        """This process takes every turn left (the request's result is not wanted)."""
        self._ints[2 * slot + self.BACK] = count

    def taken_last(self, slot: int) -> int:
        """How many turns this process has taken from the last."""
        return self._ints[2 * slot + self.BACK]

    def close(self) -> None:
        self._ints.release()
        self._view.release()
        self._map.close()


def serve(requests: IO[bytes] | None = None, replies: IO[bytes] | None = None) -> None:
    """The worker's loop. The first request is the run context's settings and patterns,
    the directory the parent's package was imported from and the descriptor of the
    parent's ``Claims`` page (or None); each later one
    ``(node name, cfg, [channels of a turn, ...], slot)``, answered in order by
    ``("ok", [writes of each turn, ...])`` or ``("error", text)``, until the input ends:
    the writes of the turns it took, from the first, while the parent had not taken
    them from the last (every turn, without a page).
    A tuple of names runs those node functions in turn on each turn, each reading what
    those before it wrote; the turn's writes are all of theirs. Requests are read on a
    thread of their own as they come (into pipes of ``worker_process.PIPE_BYTES``), so
    a parent that sends the next request before this one is answered does not wait for
    this loop to end first.
    A worker whose code is not the parent's (imported from another directory) ends at
    once: the parent computes every turn itself."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    requests = requests or sys.stdin.buffer
    replies = replies or sys.stdout.buffer
    try:
        settings, patterns, secret_patterns, root, claims_fd = pickle.load(requests)
    except EOFError:
        return
    claims = None if claims_fd is None else Claims(claims_fd)
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
    inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def read() -> None:
        try:
            while True:
                inbox.put(pickle.load(requests))
        except Exception:  # the input ended (or broke): so does the worker
            inbox.put(None)

    threading.Thread(target=read, name="requests", daemon=True).start()
    while (request := inbox.get()) is not None:
        name, cfg, turns, slot = request
        try:
            fns = [OFFLOADED[n] for n in ((name,) if isinstance(name, str) else name)]
            writes: Channels = []
            with bulk_allocations():
                for index, turn in enumerate(turns):
                    if claims is not None and not claims.take_first(slot, index, len(turns)):
                        break
                    writes.append(chained(call, fns, turn, run, cfg))
            reply: tuple[str, Any] = ("ok", writes)
        except Exception as exc:  # reported; the parent computes the turns itself
            reply = ("error", f"{type(exc).__name__}: {exc}")
        pickle.dump(reply, replies, protocol=pickle.HIGHEST_PROTOCOL)
        replies.flush()


class TurnWorker:
    """One worker process, asked one stage's turns at a time, or two when the caller
    queues the next behind the one in hand (one caller at a time: a lock serialises the
    runs of a process that share it, held from a caller's first ``send`` until its
    requests are all received)."""

    def __init__(self) -> None:
        self._worker: subprocess.Popen[bytes] | None = None
        self._claims: Claims | None = None
        self._broken = False  # the worker could not start or died: compute in process
        self._lock = threading.Lock()
        self._owner: int | None = None  # the thread whose requests the worker holds
        self._out: collections.deque[int] = collections.deque()  # their slots, oldest first

    @property
    def pid(self) -> int | None:
        """The worker's process id while it runs."""
        worker = self._worker
        return None if worker is None else worker.pid

    def send(self, run: RunContext, name: str | tuple[str, ...],
             cfg: Mapping[str, Any] | None, turns: Channels, *, queued: bool = False
             ) -> int | None:
        """Hand ``turns`` (each the channels node ``name`` reads, or the nodes of a tuple
        of names, run in turn) to the worker: the request's ticket (for ``take_last``),
        or None when it cannot take them (compute them here then). Every ``send`` that
        gave a ticket is followed by one ``receive``, in order, with the lock held in
        between. While the worker holds a request of this thread's not yet received (a
        capture pass's next batch, nodes.publish.capture_pass), None too: this thread
        computes the new one itself instead of waiting for itself; unless ``queued``
        (an import's next batch, nodes.publish.bundle_apply), which goes behind it
        (one at most), to be taken up as soon as the worker is done with it."""
        if self._owner == threading.get_ident():
            if not queued or len(self._out) >= Claims.SLOTS:
                return None
        else:
            self._lock.acquire()
            self._owner = threading.get_ident()
        try:
            worker = None if self._broken else (self._worker or self._start(run))
            if worker is None:
                self._release_idle()
                return None
            assert worker.stdin is not None
            slot = 1 - self._out[-1] if self._out else 0
            if self._claims is not None:
                self._claims.reset(slot)
            pickle.dump((name, dict(cfg or {}), turns, slot), worker.stdin,
                        protocol=pickle.HIGHEST_PROTOCOL)
            worker.stdin.flush()
        except Exception:  # a pipe closed, the worker gone
            self._lose()
            self._release_idle()
            return None
        self._out.append(slot)
        return slot

    def take_last(self, ticket: int, count: int) -> int | None:
        """The last turn of request ``ticket`` (``count`` turns) that the worker has
        not taken, taken by this process: its index; None when none is left."""
        claims = self._claims
        if claims is None:
            return None
        return claims.take_last(ticket, count)

    def taken_last(self, ticket: int) -> int:
        """How many turns of request ``ticket`` this process has taken from the last."""
        return 0 if self._claims is None else self._claims.taken_last(ticket)

    def take_all(self, ticket: int, count: int) -> None:
        """Take every turn the worker has not started (its answer is not wanted)."""
        if self._claims is not None:
            self._claims.take_all(ticket, count)

    def receive(self) -> list[dict[str, Any]] | None:
        """The writes of the first turns of the oldest request not received, in order,
        as many as the worker took; None when the worker failed (compute them here
        then)."""
        self._out.popleft()
        try:
            worker = self._worker
            assert worker is not None and worker.stdout is not None
            status, value = pickle.load(worker.stdout)
        except Exception:  # a pipe closed, the worker gone, a garbled reply
            self._lose()
            return None
        finally:
            self._release_idle()
        return value if status == "ok" else None

    def _release_idle(self) -> None:
        """Let other threads use the worker once it holds none of this one's requests."""
        if not self._out:
            self._owner = None
            self._lock.release()

    def close(self) -> None:
        """End the worker (its input closed: it exits after the request in hand). The
        requests of this thread's that a failed run left unreceived are received first."""
        while self._owner == threading.get_ident():
            self.receive()
        with self._lock:
            worker, self._worker = self._worker, None
        if worker is not None:
            worker_process.end(worker, kill=False)
        self._unshare()

    def _unshare(self) -> None:
        claims, self._claims = self._claims, None
        if claims is not None:
            claims.close()

    def _lose(self) -> None:
        """The worker cannot be used again: nothing more goes to it (called with the
        lock)."""
        self._broken = True
        worker, self._worker = self._worker, None
        if worker is not None:
            worker_process.end(worker, kill=True)
        self._unshare()

    def _start(self, run: RunContext) -> subprocess.Popen[bytes] | None:
        fd = Claims.make()
        try:
            worker = worker_process.start(_BOOT, () if fd is None else (fd,))
            if worker is not None and fd is not None:
                self._claims = Claims(fd)  # its map holds a descriptor of its own
        finally:
            if fd is not None:
                os.close(fd)
        if worker is None:
            self._broken = True
            return None
        self._worker = worker
        assert worker.stdin is not None
        pickle.dump((run.settings, run.patterns, run.secret_patterns,
                     worker_process.package_root(), fd), worker.stdin,
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
