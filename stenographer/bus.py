"""The bus publisher: runs ``bus_publish`` (graphs/bus_publish) batch after batch.

``publish`` drains the outbox once (the CLI, ``stenographer bus publish``): it repeats
while a batch went through and stops at the first failure, which the graph recorded on
the ``outbox:bus`` cursor. ``background_publish`` is the scheduler job
(stenographer.scheduler) that does that every ``STENO_BUS_INTERVAL`` seconds in a server
process with the bus configured; after a failure (missing, locked, corrupt bus) the
scheduler backs off instead, doubling up to 30 s, and tries again — forever: the turns
wait in the outbox, nothing is lost.
While there is no bus file it only checks for one each round (status shows the turns
pending; ``stenographer bus publish`` records "missing" as the cursor's last error).

Several server processes on one store each run a publisher. They cannot publish an
event twice: an event is inserted only if its key is not on the bus, checked inside the
same bus write transaction, and the cursor only moves forward. At worst two processes
read the same batch and the second finds every key there.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from stenographer.scheduler import Job

if TYPE_CHECKING:
    from stenographer.app import App

__all__ = ["BusOutcome", "background_publish", "publish"]


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
        line = (f"Published to {bus}: {self.batches} batches, {self.published:,} new events, "
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


def background_publish(app: App) -> Job:
    """Publishing to the configured bus per tick, every ``settings.bus_interval``
    seconds; after a failed tick the scheduler backs off. While there is no bus file a
    tick only checks for one (a stat, like the ingest path)."""
    path = app.settings.bus_path
    if path is None:
        raise ValueError("no coordination bus configured (VERITAS_SHARED_DIR=off)")
    return Job(name="publishing to the bus", thread="steno-bus-publish",
               tick=lambda: not path.is_file() or publish(app).ok,
               interval=app.settings.bus_interval)
