"""The next GraphRAG batch, extracted in a second process while this one is written.

A batch's extraction is pure Python over the turns' text and its write is SQLite work
of about the same size; in one process they take turns on one core. ``BatchPrefetch``
hands the next batch's turns to a worker process (started on first use and kept for
the process's later batches) while this process checks and writes the current one, so
a machine with two free cores does both at once. The extract stage takes the worker's
records only when they are for exactly the batch it was given (the same turn ids, the
same turn before each session's first): a turn ingested or forgotten in between makes
it extract in process instead, as does a worker that failed. The records are the same
either way: ``batch_records`` is a pure function of the turns.

The worker (started by ``nodes.worker_process``) reads pickled batches on stdin and
writes pickled records on stdout. It ignores Ctrl-C and ends when its stdin closes: when
the parent closes it or exits.
"""

from __future__ import annotations

import pickle
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from typing import IO, TYPE_CHECKING, Any

from nodes import worker_process
from nodes.context import bulk_allocations

if TYPE_CHECKING:  # a server makes a prefetcher at start: the batches' module loads with
    # the extraction that uses it
    from store.graph_batches import BatchRecords, PendingTurn

__all__ = ["BatchPrefetch", "serve"]

_Window = Mapping[int, "PendingTurn | None"]
_Key = tuple[tuple[int, ...], tuple[tuple[int, int], ...]]
_BOOT = "from nodes.extract.graph_prefetch import serve; serve()"


def _key(turns: Sequence[PendingTurn], window: _Window) -> _Key:
    return (tuple(t.id for t in turns),
            tuple(sorted((s, 0 if t is None else t.id) for s, t in window.items())))


def serve(requests: IO[bytes] | None = None, replies: IO[bytes] | None = None) -> None:
    """The worker's loop: (turns, window) in, ``("ok", records)`` or ``("error", text)``
    out, until the input ends."""
    # the extraction's modules in the worker only: a server makes a prefetcher at
    # start, and most servers never run a GraphRAG extraction
    from nodes.extract.graph_records import batch_records

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    requests = requests or sys.stdin.buffer
    replies = replies or sys.stdout.buffer
    while True:
        try:
            turns, window = pickle.load(requests)
        except EOFError:
            return
        try:
            with bulk_allocations():
                reply: tuple[str, Any] = ("ok", batch_records(turns, window))
        except Exception as exc:  # reported; the parent extracts the batch itself
            reply = ("error", f"{type(exc).__name__}: {exc}")
        pickle.dump(reply, replies, protocol=pickle.HIGHEST_PROTOCOL)
        replies.flush()


class _WorkerLost(Exception):
    """The worker could not be reached: no batch goes to it again."""


class _ExtractionFailed(Exception):
    """The worker's extraction of a batch raised (the text says what)."""


class BatchPrefetch:
    """At most one batch extracted ahead, in one worker process."""

    def __init__(self) -> None:
        self._worker: subprocess.Popen[bytes] | None = None
        self._ahead: tuple[_Key, Future[BatchRecords]] | None = None
        self._exchange: threading.Thread | None = None  # the request on the pipe
        self._broken = False  # the worker could not start or died: extract in process
        self._lock = threading.Lock()

    def submit(self, turns: Sequence[PendingTurn], window: _Window) -> None:
        """Start extracting ``turns`` (the next batch) in the worker."""
        with self._lock:
            self._ahead = None  # a batch nobody took: its records are dropped on arrival
            if self._broken or not turns:
                return
            worker = self._worker or self._start()
            if worker is None:
                return
            future: Future[BatchRecords] = Future()
            before = self._exchange
            self._exchange = threading.Thread(
                target=self._ask, args=(worker, before, turns, window, future),
                name="graphrag-prefetch", daemon=True)
            self._exchange.start()
            self._ahead = (_key(turns, window), future)

    def take(self, turns: Sequence[PendingTurn], window: _Window) -> BatchRecords | None:
        """The worker's records of exactly this batch (waiting for them), or None: none
        was submitted, it was for other turns, or the worker failed."""
        with self._lock:
            ahead, self._ahead = self._ahead, None
        if ahead is None or ahead[0] != _key(turns, window):
            return None
        try:
            return ahead[1].result()
        except _WorkerLost:
            self._broken = True
            return None
        except _ExtractionFailed:  # the stage's own extraction raises it with its trace
            return None

    def close(self) -> None:
        with self._lock:
            self._ahead = None
            worker, self._worker = self._worker, None
            exchange, self._exchange = self._exchange, None
        if worker is not None:
            worker_process.end(worker, kill=False, reader=exchange)

    def _start(self) -> subprocess.Popen[bytes] | None:
        self._worker = worker_process.start(_BOOT)
        self._broken = self._worker is None
        return self._worker

    @staticmethod
    def _ask(worker: subprocess.Popen[bytes], before: threading.Thread | None,
             turns: Sequence[PendingTurn], window: _Window,
             future: Future[BatchRecords]) -> None:
        """On the exchange thread: one request and its reply, after the one before."""
        if before is not None:
            before.join()
        assert worker.stdin is not None and worker.stdout is not None
        try:
            pickle.dump((turns, window), worker.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            worker.stdin.flush()
            status, value = pickle.load(worker.stdout)
        except Exception as exc:  # a pipe closed, the worker gone, a garbled reply
            future.set_exception(_WorkerLost(repr(exc)))
            return
        if status == "ok":
            future.set_result(value)
        else:
            future.set_exception(_ExtractionFailed(value))
