"""The bus publisher: runs ``bus_publish`` (graphs/bus_publish) batch after batch.

``publish`` drains the outbox once (the CLI, ``stenographer bus publish``): it repeats
while a batch went through and stops at the first failure, which the graph recorded on
the ``outbox:bus`` cursor. ``BackgroundBusPublish`` does that every
``STENO_BUS_INTERVAL`` seconds in a server process with the bus configured; after a
failure (missing, locked, corrupt bus) it waits ``backoff(attempt)`` instead, doubling
up to 30 s, and tries again — forever: the turns wait in the outbox, nothing is lost.
While there is no bus file it only checks for one each round (status shows the turns
pending; ``stenographer bus publish`` records "missing" as the cursor's last error).

Several server processes on one store each run a publisher. They cannot publish an
event twice: an event is inserted only if its key is not on the bus, checked inside the
same bus write transaction, and the cursor only moves forward. At worst two processes
read the same batch and the second finds every key there.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nodes.publish.wording import counted
from stenographer.sync import backoff

if TYPE_CHECKING:
    from stenographer.app import App

__all__ = ["BackgroundBusPublish", "BusOutcome", "publish"]


@dataclass
class BusOutcome:
    ok: bool = True
    batches: int = 0
    records: int = 0
    published: int = 0
    duplicates: int = 0
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def text(self, bus: str) -> str:
        line = (f"Published to {bus}: {counted(self.batches, 'batch', 'batches')}, "
                f"{counted(self.published, 'new event')}, "
                f"{self.duplicates:,} already there")
        return line if self.ok else f"{line}; stopped: {self.error}"


def publish(app: App, *, batch: int | None = None, stop: threading.Event | None = None,
            report: Callable[[str], None] | None = None) -> BusOutcome:
    """Publish every turn after the bus cursor, batch by batch, until none is left or
    a batch fails."""
    request = {"batch": batch or app.settings.bus_batch}
    outcome = BusOutcome()
    while stop is None or not stop.is_set():
        out, _ = app.run("bus_publish", request)
        reply = out["reply"]
        if not reply["ok"]:
            outcome.ok, outcome.error = False, str(reply["text"])
            return outcome
        if reply["through"] is None:
            return outcome
        outcome.batches += 1
        outcome.records += int(reply["records"])
        outcome.published += int(reply["published"])
        outcome.duplicates += int(reply["duplicates"])
        if report is not None:
            report(str(reply["text"]))
    outcome.ok, outcome.error = False, "stopped before the outbox was drained"
    return outcome


class BackgroundBusPublish:
    """Publishes to the configured bus every ``settings.bus_interval`` seconds on a
    daemon thread until ``stop``; after a failure it backs off and retries."""

    def __init__(self, app: App) -> None:
        if app.settings.bus_path is None:
            raise ValueError("no coordination bus configured (VERITAS_SHARED_DIR=off)")
        self.app = app
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="steno-bus-publish",
                                        daemon=True)

    def start(self) -> BackgroundBusPublish:
        self._thread.start()
        return self

    def _loop(self) -> None:
        path = self.app.settings.bus_path
        assert path is not None
        while not self._stop.is_set():
            if not path.is_file():  # no bus (yet): a stat per round, like the ingest path
                self._stop.wait(self.app.settings.bus_interval)
                continue
            try:
                outcome = publish(self.app, stop=self._stop)
                ok = outcome.ok
            except Exception as ex:  # a store error: report, keep the server serving
                print(f"omega-stenographer: publishing to the bus failed: {ex}",
                      file=sys.stderr)
                ok = False
            self.failures = 0 if ok else self.failures + 1
            self._stop.wait(self.app.settings.bus_interval if ok else backoff(self.failures))

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
