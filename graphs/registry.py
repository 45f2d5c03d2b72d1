"""The registry: every graph definition, the route conditions, and where node types live.

Node types are the functions registered with ``@node`` (``nodes.context``), named by
function. Nothing here lists them: ``node_modules`` finds the module that defines each
one by reading the node packages' source (``@node`` on the line before its ``def``),
without importing them. ``build_graphs`` returns a ``Graphs`` that compiles a graph on
its first run and imports a node's module when the node first runs, so a process that
runs ``search`` never imports GraphRAG's networkx, nor a hook's briefing the capture's
numpy. ``all_definitions`` returns every graph's definition (importing definitions
only: plain data) for a listing of graphs, their stages and their edges.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

from graphs import (
    bus_publish,
    capture,
    catalog,
    compress,
    contract_audit,
    doctor,
    forget,
    graphrag,
    guard,
    hook,
    ingest,
    inspector,
    keyword_index,
    migrate,
    milestone,
    notes,
    recover,
    search,
    sessions,
    stats,
    status,
    sync,
    trace,
)
from graphs.runner import Graphs
from nodes.context import NODES
from nodes.publish.traces import persist_trace

__all__ = ["BULK", "CONDITIONS", "STEP_LIMITS", "all_definitions", "build_graphs", "compile_all",
           "definition", "node_modules"]

NODE_PACKAGE = Path(__file__).resolve().parent.parent / "nodes"
# A node's definition: ``@node`` on a line of its own, maybe more decorators, its ``def``.
# Matched from the newline before ``@node``: a literal start lets the search skip ahead
# instead of trying every line (^ with re.M), about 8x faster over the node packages.
_NODE_DEF = re.compile(rb"\n@node\n(?:@.*\n)*def (\w+)\(")

# Route conditions: each returns a route label; its parameters name the channels it
# reads, and it reads only small channels that a node wrote for the purpose.
CONDITIONS: dict[str, Callable[..., str]] = {
    "compression_due": lambda compression_due: "yes" if compression_due else "no",
    "compress_again": lambda again: "again" if again else "done",
    "search_mode": lambda query: str(query["mode"]),
    "audit_more": lambda position: "more" if position is not None else "done",
    "bus_event_found": lambda event: "yes" if event is not None else "no",
    "has_pending": lambda pending: "yes" if pending else "no",
    "has_session": lambda session_row: "yes" if session_row is not None else "no",
    "has_outgoing": lambda outgoing: "yes" if outgoing["through"] is not None else "no",
    "delivered": lambda delivery: "ok" if delivery["ok"] else "failed",
    "more_batches": lambda totals: "more" if totals["more"] else "done",
    "copy_left": lambda progress, stopped: ("copy" if progress["table"] is not None
                                            and not stopped else "done"),
    "copy_done": lambda migrated: "done" if migrated["done"] else "stopped",
    "turns_pending": lambda published: ("more" if published["turns"]
                                        and published["remaining"] else "done"),
    "communities_stale": lambda stats: "stale" if stats["stale"] else "fresh",
    "page_of_turns": lambda page: ("turns" if page["table"] == "exchanges"
                                   and page["rows"] else "rows"),
    "briefing_scope": lambda scope: str(scope),
    "has_query": lambda query: "yes" if query["text"] is not None else "no",
    "has_source": lambda source: "yes" if source is not None else "no",
    "ahead_taken": lambda taken: "taken" if taken else "read",
    "capture_again": lambda again: "again" if again else "done",
    "hook_task": lambda task: str(task),
    "wanted": lambda wanted: str(wanted),  # one stored item, or a page of them
    "settings_valid": lambda data_dir: "valid" if data_dir is not None else "invalid",
    "store_dialect": lambda database_url: ("postgresql" if database_url is not None
                                           else "sqlite"),
}


def all_definitions() -> list[dict[str, Any]]:
    """Every graph's definition, as the runner compiles it (a subgraph is inside the
    definition that embeds it). Imports definitions only, never a node module."""
    return [
        ingest.DEFINITION, ingest.BATCH, compress.DEFINITION, search.DEFINITION,
        guard.DEFINITION, notes.DEFINITION, milestone.DEFINITION, status.DEFINITION,
        trace.DEFINITION, *inspector.DEFINITIONS, sessions.DEFINITION, stats.DEFINITION,
        contract_audit.DEFINITION, forget.DEFINITION, *graphrag.DEFINITIONS,
        *capture.DEFINITIONS, *sync.DEFINITIONS, bus_publish.DEFINITION, migrate.DEFINITION,
        hook.DEFINITION, recover.DEFINITION, keyword_index.DEFINITION, doctor.DEFINITION,
        catalog.DEFINITION,
    ]


# Graphs whose loops may run longer than the engine's default step limit.
STEP_LIMITS: dict[str, int] = {"contract_audit": contract_audit.MAX_STEPS,
                               "bus_publish": bus_publish.MAX_STEPS,
                               "recover": recover.MAX_STEPS,
                               "migrate": migrate.MAX_STEPS,
                               "graphrag_extract": graphrag.MAX_STEPS,
                               "capture": capture.MAX_STEPS,
                               "hook": capture.MAX_STEPS,
                               **dict.fromkeys(sync.LOOPING, sync.MAX_STEPS)}

# Graphs that move many turns at once. Their runs pause the cyclic garbage collector
# (nodes.context.bulk_allocations): a batch's turns are many small containers that die
# by reference counting, and each full collection walks all of them and finds nothing.
# Measured on a capture pass of 100,000 generated turns: 31 full collections, ~70 ms
# each, 2.8 s of the writing thread's 23 s in the collector; 10 objects were in cycles.
BULK = frozenset({"ingest_batch", "capture", "hook", "sync_import", "sync_pull", "migrate",
                  "keyword_index_rebuild", "graphrag_batch", "graphrag_extract"})


@cache
def _by_name() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for d in all_definitions():
        if d["name"] in found:
            raise ValueError(f"two graphs are named {d['name']!r}")
        found[d["name"]] = d
    return found


def definition(name: str) -> dict[str, Any]:
    try:
        return _by_name()[name]
    except KeyError:
        raise KeyError(f"no graph named {name!r}; graphs: {', '.join(sorted(_by_name()))}"
                       ) from None


def _sources(folder: str) -> Iterator[str]:
    """The ``.py`` files under ``folder`` (``os.scandir``: a fraction of ``rglob``'s cost)."""
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if entry.name != "__pycache__":
                    yield from _sources(entry.path)
            elif entry.name.endswith(".py"):
                yield entry.path


@cache
def node_modules() -> dict[str, str]:
    """Each node type's module, found in the node packages' source without importing
    them (about 3 ms for a hundred files: read as bytes, one regular expression with a
    literal start)."""
    found: dict[str, str] = {}
    root = len(str(NODE_PACKAGE.parent)) + 1
    for path in sorted(_sources(str(NODE_PACKAGE))):
        module = path[root:-len(".py")].replace(os.sep, ".")
        with open(path, "rb") as source:
            text = b"\n" + source.read()
        for match in _NODE_DEF.finditer(text):
            name = match.group(1).decode("ascii")
            if name in found:
                raise ValueError(f"two node functions are named {name!r} "
                                 f"({found[name]} and {module}): rename one")
            found[name] = module
    return found


def _load(name: str) -> tuple[dict[str, Any], int | None]:
    """What ``Graphs`` needs to compile ``name``: its definition and its step limit (the
    modules of its nodes are imported as its nodes first run)."""
    return definition(name), STEP_LIMITS.get(name)


def build_graphs() -> Graphs:
    """The process's graphs: each compiled on its first run, each node type's module
    imported when a node of the type first runs."""
    graphs = Graphs(trace_sink=persist_trace, loader=_load, node_types=NODES,
                    modules=node_modules(), bulk=BULK)
    for name, condition in CONDITIONS.items():
        graphs.condition(name, condition)
    return graphs


def compile_all(graphs: Graphs) -> Graphs:
    """Compile every graph now (the tests do, to find a definition that fails)."""
    for d in all_definitions():
        graphs.engine(d["name"])
    return graphs


