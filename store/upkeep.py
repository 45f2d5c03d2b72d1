"""A store's upkeep thread: work that searches (or commits) start and do not wait for.

One thread at a time per instance. A store has two: the write-ahead log's checkpoints,
and the keyword indexes' upkeep: the FTS5 index's merge (``store.sqlite.search.keep_merged``)
and, from the derived keyword index's size, that index's flush and first build
(``store.keyword_index``). Work asked for while a thread
runs is not queued: the next search that finds it due asks again. ``stop`` (before the
store closes) asks the running work to stop at its next step and waits for it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["Upkeep"]


class Upkeep:
    """The upkeep thread of one store."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    def start(self, work: Callable[[], None], name: str) -> bool:
        """Run ``work`` on a thread of its own unless one is running; whether it started."""
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return False
            self._thread = threading.Thread(target=work, name=name, daemon=True)
            self._thread.start()
            return True

    def current(self) -> bool:
        """Whether the caller runs on the upkeep thread (beside this process's searches)."""
        return threading.current_thread() is self._thread

    def stopping(self) -> bool:
        """Whether ``stop`` asked the running work to stop (work that goes in steps checks
        it between two)."""
        return self._stopping.is_set()

    def wait(self) -> None:
        """Until the running work has ended."""
        thread = self._thread
        if thread is not None:
            thread.join()

    def stop(self) -> None:
        """Until the running work has ended, asking it to stop at its next step (before
        the store closes)."""
        self._stopping.set()
        try:
            self.wait()
        finally:
            self._stopping.clear()
