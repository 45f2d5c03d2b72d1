"""The sync driver: push and pull batch after batch, with backoff on transient failures.

Each batch is one run of ``sync_push`` or ``sync_pull`` (graphs/sync). The driver only
strings the runs together: it gives each run a fresh file for its bundle (removed after
the run), repeats while there is more, and after a failure the graph marked
``retryable`` (the peer unreachable, a timeout, 429 or 5xx, a pulled bundle that did not
verify) waits ``backoff(attempt)`` and tries again, ``settings.sync_retries`` times. The
cursor moves only inside a run that the peer acknowledged, so stopping the driver at
any moment — even SIGKILL — loses nothing: the next run starts from the cursor.

``BackgroundPush`` runs ``push`` every ``STENO_SYNC_INTERVAL`` seconds in a server that
has ``STENO_SYNC_PEER`` set.
"""

from __future__ import annotations

import random
import sys
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodes.publish.wording import counted
from store.errors import InvalidInput

if TYPE_CHECKING:
    from stenographer.app import App

__all__ = ["BACKOFF_CAP_S", "BackgroundPush", "SyncOutcome", "backoff", "pull", "push"]

BACKOFF_FIRST_S = 0.5
BACKOFF_CAP_S = 30.0


def backoff(attempt: int) -> float:
    """Seconds to wait before retry ``attempt`` (1, 2, …): doubling from 0.5 s up to
    30 s, with jitter so that several senders do not retry in step."""
    base: float = min(BACKOFF_CAP_S, BACKOFF_FIRST_S * 2.0 ** (attempt - 1))
    jitter: float = 0.5 + random.random() / 2
    return base * jitter


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

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def text(self) -> str:
        verb = "Pushed to" if self.direction == "push" else "Pulled from"
        line = (f"{verb} {self.peer}: {counted(self.batches, 'batch', 'batches')}, "
                f"{counted(self.applied, 'new turn')} stored, {self.duplicates:,} already there")
        if self.retries:
            line += f", {counted(self.retries, 'retry', 'retries')}"
        return line if self.ok else f"{line}; stopped: {self.error}"


def _spool(app: App, prefix: str) -> Path:
    folder = app.settings.data_dir / "sync"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder / f"{prefix}-{uuid.uuid4().hex}.zst"


def _one_batch(app: App, graph: str, request: dict[str, Any]) -> dict[str, Any]:
    path = _spool(app, "out" if graph == "sync_push" else "in")
    try:
        out, _ = app.run(graph, {**request, "path": str(path)})
        return dict(out["reply"])
    except InvalidInput as ex:
        if graph != "sync_pull" or ex.node != "verify":
            raise
        # The peer sent a bundle that does not verify (damaged on the way?): nothing of
        # it was applied; record it and fetch it again.
        app.run("sync_failure", {"direction": "inbox", "url": request["url"],
                                 "error": f"the pulled bundle was refused: {ex}"})
        return {"ok": False, "retryable": True, "more": False,
                "text": f"the pulled bundle was refused: {ex}"}
    finally:
        path.unlink(missing_ok=True)
        path.with_name(path.name + ".part").unlink(missing_ok=True)


def _drive(app: App, direction: str, url: str, *, batch: int | None,
           stop: threading.Event | None, report: Callable[[str], None] | None
           ) -> SyncOutcome:
    graph = "sync_push" if direction == "push" else "sync_pull"
    request = {"url": url, "batch": batch or app.settings.sync_batch}
    outcome = SyncOutcome(direction, url.rstrip("/"))
    attempt = 0
    stop = stop or threading.Event()
    while not stop.is_set():
        reply = _one_batch(app, graph, request)
        if reply["ok"]:
            attempt = 0
            if reply.get("records") or reply.get("bundle_turns") or reply.get("through"):
                outcome.batches += 1
                outcome.records += int(reply.get("records") or reply.get("bundle_turns") or 0)
                outcome.applied += int(reply.get("applied") or 0)
                outcome.duplicates += int(reply.get("duplicates") or 0)
                if report is not None:
                    report(reply["text"])
            if not reply["more"]:
                return outcome
            continue
        outcome.error = reply["text"]
        if not reply.get("retryable") or attempt >= app.settings.sync_retries:
            outcome.ok = False
            return outcome
        attempt += 1
        outcome.retries += 1
        wait = backoff(attempt)
        if report is not None:
            report(f"{reply['text']}; retry {attempt} of {app.settings.sync_retries} "
                   f"in {wait:.1f} s")
        stop.wait(wait)
    outcome.ok, outcome.error = False, "stopped before the sync finished"
    return outcome


def push(app: App, url: str, *, batch: int | None = None, stop: threading.Event | None = None,
         report: Callable[[str], None] | None = None) -> SyncOutcome:
    """Send every turn after the peer's outbox cursor, batch by batch."""
    return _drive(app, "push", url, batch=batch, stop=stop, report=report)


def pull(app: App, url: str, *, batch: int | None = None, stop: threading.Event | None = None,
         report: Callable[[str], None] | None = None) -> SyncOutcome:
    """Fetch and apply every turn after the peer's inbox cursor, batch by batch."""
    return _drive(app, "pull", url, batch=batch, stop=stop, report=report)


class BackgroundPush:
    """Pushes to ``settings.sync_peer`` every ``settings.sync_interval`` seconds on a
    daemon thread until ``stop``. Errors are recorded on the peer's cursor (status shows
    them) and the next round tries again."""

    def __init__(self, app: App) -> None:
        if app.settings.sync_peer is None:
            raise ValueError("no STENO_SYNC_PEER configured")
        self.app, self.peer = app, app.settings.sync_peer
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="steno-sync-push",
                                        daemon=True)

    def start(self) -> BackgroundPush:
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                push(self.app, self.peer, stop=self._stop)
            except Exception as ex:  # a store error: report, keep the server serving
                print(f"omega-stenographer: background push to {self.peer} failed: {ex}",
                      file=sys.stderr)
            self._stop.wait(self.app.settings.sync_interval)

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
