"""The application object: settings, store and compiled graphs of one process."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from graphs.runner import Graphs, Observer
from graphs.sync import NETWORK
from nodes.context import RunContext
from nodes.extract.patterns import compile_patterns
from nodes.extract.secrets import compile_extra
from stenographer.scheduler import BACKOFF_CAP_S, BACKOFF_FIRST_S, BACKOFF_JITTER
from stenographer.settings import USABLE_CORES, Settings, reveal
from store.backend import Backend, open_store
from store.bus import Bus
from store.errors import StorageFailure, StoreError, partly_done

__all__ = ["WARM_GRAPHS", "App", "open_app"]

_GRAPHS: Graphs | None = None
# The graphs of the tools an agent calls in every session (ingest, query_history,
# compact_guard, get_brief), which ``App.warm`` prepares.
WARM_GRAPHS = ("ingest", "search", "guard", "notes")


def graphs() -> Graphs:
    """The process's graphs (each compiled on its first run)."""
    global _GRAPHS
    if _GRAPHS is None:
        from graphs.registry import build_graphs  # imports the engine: when needed

        _GRAPHS = build_graphs()
    return _GRAPHS


@dataclass
class App:
    settings: Settings
    store: Backend
    ctx: RunContext
    graphs: Graphs

    def run(self, graph: str, request: dict[str, Any], observe: Observer | None = None
            ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Run a named graph on this thread; returns (channel values, stage trace).
        ``observe(stage, writes)`` is called after each stage (a progress bar).

        A storage failure says "nothing was stored" only when the run committed nothing
        before it (e.g. an ingest whose turn was stored and whose compression failed)."""
        before = self.store.commits()
        try:
            return self.graphs.run(graph, {"request": request}, self.ctx, observe)
        except StorageFailure as ex:
            told = partly_done(ex) if self.store.commits() != before else ex
            if told is ex:
                raise
            raise told from ex

    def finish_compression(self) -> list[int]:
        """Run the ``recover`` graph: compress every session left with a full batch of
        uncompressed turns (a process killed between an ingest and its compression);
        returns their row ids. Servers call it once at start. A read-only store is
        left as it is: the next writable open finishes them."""
        if self.store.read_only:
            return []
        out, _ = self.run("recover", {})
        recovered: list[int] = out["reply"]["recovered"]
        return recovered

    def warm(self) -> None:
        """Do now what the first calls of an agent's tools would do before their work:
        compile their graphs, import their node modules (numpy among them) and load the
        store's search structures (``Backend.warm``). A server calls it once idle after
        opening: at a million turns a first search spent ~1 s there."""
        for graph in WARM_GRAPHS:
            self.graphs.prepare(graph)
        self.store.warm()

    def close(self) -> None:
        """Close the store. Stage traces that cannot be written now (a full disk) are
        reported on stderr: they never fail the shutdown."""
        if self.ctx.graph_prefetch is not None:
            self.ctx.graph_prefetch.close()
        if self.ctx.turn_worker is not None:
            self.ctx.turn_worker.close()
        try:
            self.store.close()
        except StoreError as ex:
            print(f"stenographer: stage traces of this process not saved: {ex}",
                  file=sys.stderr)


def open_app(settings: Settings | None = None, *, compiled: Graphs | None = None,
             busy_timeout_ms: int | None = None) -> App:
    """The store and the graphs (each compiled on its first run): the process's, or
    ``compiled`` (a hook's own, for which no GraphRAG prefetch worker is set up);
    ``busy_timeout_ms``: how long a statement waits for another process's lock
    (``store.backend.open_store``)."""
    settings = settings or Settings.from_env()
    patterns = compile_patterns(settings.decision_patterns, settings.blocker_patterns)
    store = open_store(settings.db_path, database_url=reveal(settings.database_url),
                       synchronous=settings.synchronous, vector_dim=settings.vector_dim,
                       busy_timeout_ms=busy_timeout_ms)
    bus = None if settings.bus_path is None else Bus(settings.bus_path,
                                                     timeout_ms=settings.bus_timeout_ms)
    prefetch = None
    if settings.graphrag_prefetch and compiled is None:  # GraphRAG is in the full set only
        from nodes.extract.graph_prefetch import BatchPrefetch

        prefetch = BatchPrefetch()  # no process yet
    turn_worker = None
    # not a hook's own small set (its passes are a few turns), nor a machine of one core
    if compiled is None and USABLE_CORES > 1:
        from nodes.turn_worker import TurnWorker

        turn_worker = TurnWorker()  # no process yet: started by the first large batch
    ctx = RunContext(store=store, settings=settings, patterns=patterns,
                     secret_patterns=compile_extra(settings.secret_patterns), bus=bus,
                     graph_prefetch=prefetch, turn_worker=turn_worker)
    app = App(settings=settings, store=store, ctx=ctx, graphs=compiled or graphs())
    for graph, node in NETWORK.items():  # transient failures of a peer: the engine retries
        app.graphs.retry(graph, node, settings.sync_retries, BACKOFF_FIRST_S, BACKOFF_CAP_S,
                         BACKOFF_JITTER)
    if compiled is None:  # a server or a command, not a hook's own small set
        _rebuild_keyword_index(app)
    return app


def _rebuild_keyword_index(app: App) -> None:
    """A SQLite store whose derived keyword index was not built for it (created before
    it, copied without it) has it written again now, by a process that runs every graph
    (a server, a command): until then its searches would use FTS5."""
    if app.store.keywords_need_rebuild():
        try:
            app.run("keyword_index_rebuild", {})
        except StoreError as ex:  # another process is writing it: FTS5 answers meanwhile
            print(f"stenographer: the keyword index was not rebuilt: {ex}", file=sys.stderr)
