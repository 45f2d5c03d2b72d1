"""Push and pull: one run of ``sync_push`` or ``sync_pull`` (graphs/sync) each.

The graph loops over the batches itself and its node that talks to the peer retries
transient failures with the engine's retry policy (``STENO_SYNC_RETRIES`` times, the
project's back-off, stenographer.scheduler); the cursor moves only inside a batch the
peer acknowledged, so stopping at any moment — even SIGKILL — loses nothing: the next
run starts from the cursor.

``background_push`` is the scheduler job of a server that has ``STENO_SYNC_PEER`` set:
a push every ``STENO_SYNC_INTERVAL`` seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from stenographer.scheduler import Job

if TYPE_CHECKING:
    from stenographer.app import App

__all__ = ["SyncOutcome", "background_push", "pull", "push"]


@dataclass
class SyncOutcome:
    direction: str
    peer: str
    ok: bool = True
    batches: int = 0
    records: int = 0
    applied: int = 0
    duplicates: int = 0
    retries: int = 0
    error: str | None = None
    text: str = field(default="", repr=False)
    lines: list[str] = field(default_factory=list, repr=False)  # one per batch

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("text", "lines")}


def _sync(app: App, graph: str, url: str, batch: int | None) -> SyncOutcome:
    out, _ = app.run(graph, {"url": url,
                             "batch": app.settings.sync_batch if batch is None else batch})
    reply = out["reply"]
    return SyncOutcome(**{k: reply[k] for k in (
        "direction", "peer", "ok", "batches", "records", "applied", "duplicates", "retries",
        "error", "text", "lines")})


def push(app: App, url: str, *, batch: int | None = None) -> SyncOutcome:
    """Send every turn after the peer's outbox cursor, batch by batch: one graph run."""
    return _sync(app, "sync_push", url, batch)


def pull(app: App, url: str, *, batch: int | None = None) -> SyncOutcome:
    """Fetch and apply every turn after the peer's inbox cursor: one graph run."""
    return _sync(app, "sync_pull", url, batch)


def background_push(app: App) -> Job:
    """A push to ``settings.sync_peer`` per tick, every ``settings.sync_interval``
    seconds; errors are recorded on the peer's cursor (status shows them) and the next
    tick tries again."""
    peer = app.settings.sync_peer
    if peer is None:
        raise ValueError("no STENO_SYNC_PEER configured")
    return Job(name=f"background push to {peer}", thread="steno-sync-push",
               tick=lambda: push(app, peer).ok, interval=app.settings.sync_interval,
               back_off=False)
