"""The one scheduler: runs a watcher's graph once per tick on a daemon thread.

A server's background push (``sync_push`` to ``STENO_SYNC_PEER``), its bus publisher
(``bus_publish``) and the capture watcher are each a ``Job``: a tick runs the job's
graph once (the graph itself loops over batches), then the scheduler waits the job's
interval, or after a failed tick ``backoff(failures)``, and ticks again until
``stop``. This is the only loop in the project that decides between graph runs.

``backoff`` is the project's one back-off (store.backoff) with the scheduler's
constants: the same schedule (doubling from
``BACKOFF_FIRST_S`` up to ``BACKOFF_CAP_S``, ± ``BACKOFF_JITTER``) is the engine's retry
policy on the nodes that talk to a peer (stenographer.app), so several senders never
retry in step and no wait grows past half a minute.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass

from store.backoff import backoff as delay

__all__ = ["BACKOFF_CAP_S", "BACKOFF_FIRST_S", "BACKOFF_JITTER", "Job", "Scheduler",
           "backoff"]

BACKOFF_FIRST_S = 0.5
BACKOFF_CAP_S = 30.0
BACKOFF_JITTER = 0.25  # a wait is spread by ± this fraction


def backoff(attempt: int) -> float:
    """Seconds to wait before retry ``attempt`` (1, 2, …) after a failed tick."""
    return delay(attempt, first_s=BACKOFF_FIRST_S, cap_s=BACKOFF_CAP_S, jitter=BACKOFF_JITTER)


@dataclass(frozen=True)
class Job:
    """``tick`` runs the job's graph once and says whether it succeeded; ``interval``
    is the wait after a tick that did, and after one that did not unless ``back_off``
    (a graph whose own nodes already retried with back-off). ``name`` says what failed
    in a message, ``thread`` names the thread."""

    name: str
    thread: str
    tick: Callable[[], bool]
    interval: float
    back_off: bool = True


class Scheduler:
    """Runs one job's ticks until ``stop`` (or the ``stopping`` event given is set):
    on a daemon thread (``start``) or on the calling thread (``run``, a command that
    only watches)."""

    def __init__(self, job: Job, stopping: threading.Event | None = None) -> None:
        self.job = job
        self.failures = 0  # consecutive failed ticks
        self.stopping = stopping or threading.Event()
        self._thread = threading.Thread(target=self.run, name=job.thread, daemon=True)

    def start(self) -> Scheduler:
        self._thread.start()
        return self

    def run(self) -> None:
        """Tick, wait, tick again, until stopped."""
        while not self.stopping.is_set():
            try:
                ok = self.job.tick()
            except Exception as ex:  # a store error: report, keep the server serving
                print(f"omega-stenographer: {self.job.name} failed: {ex}", file=sys.stderr)
                ok = False
            self.failures = 0 if ok else self.failures + 1
            calm = ok or not self.job.back_off
            self.stopping.wait(self.job.interval if calm else backoff(self.failures))

    def stop(self, timeout: float = 10.0) -> None:
        self.stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
