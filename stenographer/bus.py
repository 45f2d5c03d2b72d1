"""The bus publisher: runs ``bus_publish`` (graphs/bus_publish), which publishes batch
after batch.

``publish`` drains the outbox once (the CLI, ``stenographer bus publish``): one run of
the graph, which repeats while a batch went through and stops at the first failure,
recorded on the ``outbox:bus`` cursor. ``background_publish`` is the scheduler job
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

from dataclasses import dataclass, field
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
    text: str = field(default="", repr=False)
    lines: list[str] = field(default_factory=list, repr=False)  # one per batch

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("text", "lines")}


def publish(app: App, *, batch: int | None = None) -> BusOutcome:
    """Publish every turn after the bus cursor, batch by batch, until none is left or
    a batch fails: one run of ``bus_publish``."""
    out, _ = app.run("bus_publish", {
        "batch": app.settings.bus_batch if batch is None else batch})
    reply = out["reply"]
    return BusOutcome(**{k: reply[k] for k in (
        "ok", "batches", "records", "published", "duplicates", "error", "text", "lines")})


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
