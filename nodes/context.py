"""The node contract: what a node reads, what it writes, and what it is given.

A node is a plain function registered with ``@node``. Its positional parameters name
the channels it reads (the runner passes each channel's value); its return type, a
``TypedDict``, declares the channels it writes; the run context and the node's
configuration come as the keyword-only parameters ``run`` and ``cfg``, when it names
them::

    class KeywordWrites(TypedDict):
        keyword: list[Candidate]

    @node
    def keyword_candidates(query: Query, fts: str, *, run: RunContext, cfg: Cfg
                           ) -> KeywordWrites: ...

Nodes import neither the MCP SDK nor the graph engine. ``@node`` records the function
under its name in ``NODES``: a graph definition names node types by function name, and
``graphs.registry`` finds the module that defines one (docs/architecture.md).
"""

from __future__ import annotations

import gc
import inspect
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, TypeVar

from nodes.extract.patterns import DEFAULT_PATTERNS, SignalPatterns
from store.backend import Backend
from store.bus import Bus

if TYPE_CHECKING:
    from pydantic import SecretStr

    from nodes.extract.graph_prefetch import BatchPrefetch
    from nodes.turn_worker import TurnWorker

__all__ = ["NODES", "Cfg", "Knobs", "NoWrites", "NodeFn", "Reads", "RunContext", "Writes",
           "bulk_allocations", "call", "node"]

Writes = dict[str, Any]  # what a node that declares no TypedDict returns
Cfg = Mapping[str, Any]  # a node's configuration keys in the graph definition
NodeFn = Callable[..., Any]
_Fn = TypeVar("_Fn", bound=NodeFn)

class NoWrites(TypedDict):
    """What a node that writes no channel returns (``{}``)."""


# Every node function by name, filled by ``@node`` as node modules are imported.
NODES: dict[str, NodeFn] = {}


def node(fn: _Fn) -> _Fn:
    """Register ``fn`` as a node type named after the function; returns it unchanged.
    Two functions of one name are refused: a definition could not say which it means."""
    known = NODES.get(fn.__name__)
    if known is not None and (known.__module__, known.__qualname__) != (
            fn.__module__, fn.__qualname__):
        raise ValueError(f"two node functions are named {fn.__name__!r} "
                         f"({known.__module__} and {fn.__module__}): rename one")
    NODES[fn.__name__] = fn
    return fn


class Knobs(Protocol):
    """The settings that nodes read (``stenographer.settings.Settings`` satisfies it)."""

    @property
    def turn_limit(self) -> int: ...
    @property
    def top_k(self) -> int: ...
    @property
    def max_chars(self) -> int: ...
    @property
    def briefing_chars(self) -> int: ...
    @property
    def max_content_chars(self) -> int: ...
    @property
    def trace_retention(self) -> int: ...
    @property
    def vector_dim(self) -> int: ...
    @property
    def redact_secrets(self) -> bool: ...
    @property
    def graphrag_seed(self) -> int: ...
    @property
    def graphrag_batch(self) -> int: ...
    @property
    def graphrag_resolution(self) -> float: ...
    @property
    def graphrag_prefetch(self) -> int: ...

    @property
    def data_dir(self) -> Path: ...

    @property
    def sync_peer(self) -> str | None: ...
    @property
    def sync_token(self) -> SecretStr | None: ...
    @property
    def sync_timeout(self) -> float: ...
    @property
    def bus_publish(self) -> bool: ...
    @property
    def bus_publish_timeout_ms(self) -> int: ...
    @property
    def bus_excerpt_chars(self) -> int: ...


@dataclass(frozen=True)
class RunContext:
    """Shared by every run of a process: the store, the settings, compiled patterns,
    the coordination bus (and, for `stenographer migrate`, the store it copies from;
    for `graphrag extract`, the worker that extracts the next batch)."""

    store: Backend
    settings: Knobs
    patterns: SignalPatterns = DEFAULT_PATTERNS
    secret_patterns: tuple[re.Pattern[str], ...] = ()  # STENO_SECRET_PATTERNS, compiled
    bus: Bus | None = None  # the coordination bus (VERITAS_SHARED_DIR); None: off
    source: Backend | None = None  # migrate: the store copied from (``store`` is the target)
    stop: threading.Event | None = None  # migrate: set by Ctrl-C; the copy stops between pages
    # GraphRAG: the next batch extracted in a worker process (None: all in this process)
    graph_prefetch: BatchPrefetch | None = None
    # a large batch's per-turn stages: shared with a worker process (None: all in this one)
    turn_worker: TurnWorker | None = None
    # this run's failed attempts, node → messages (the runner gives each run its own)
    failed: Mapping[str, list[str]] = field(default_factory=dict, compare=False)

    def errors(self, node: str) -> list[str]:
        """What ``node`` raised in this run, one message per failed attempt, oldest
        first. The engine's error channel says which node failed and how (retried,
        exhausted, not retryable) but not the message."""
        return list(self.failed.get(node, ()))


@contextmanager
def bulk_allocations() -> Iterator[None]:
    """Pause the cyclic garbage collector around a whole run (``graphs.registry.BULK``)
    or a worker's request that builds many small, acyclic objects (a GraphRAG batch:
    hundreds of thousands of tuples and lists; a bulk write's batches of turns).
    Each allocation counts towards a collection that walks the young objects and, often
    enough, the whole heap, and finds nothing: the values die by reference counting.
    Extraction of generated turns: ~15% less CPU. The pause is the process's (every
    thread's); restores the previous state."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class Reads:
    """What a node or a route condition reads, from its signature (inspected once):
    the channels its positional parameters name (``optional``: those with a default,
    passed only where the graph has the channel), and whether it takes the keyword-only
    ``run`` (the run context) and ``cfg`` (its configuration in the definition)."""

    __slots__ = ("cfg", "channels", "optional", "run")

    def __init__(self, fn: Callable[..., Any]) -> None:
        params = inspect.signature(fn).parameters.values()
        positional = [p for p in params
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        keywords = {p.name for p in params if p.kind is p.KEYWORD_ONLY}
        if unknown := keywords - {"run", "cfg"}:
            raise TypeError(f"{fn.__name__}: keyword-only parameters are run and cfg, "
                            f"not {sorted(unknown)}")
        self.channels = tuple(p.name for p in positional)
        self.optional = frozenset(p.name for p in positional if p.default is not p.empty)
        self.run, self.cfg = "run" in keywords, "cfg" in keywords


_READS: dict[Callable[..., Any], Reads] = {}


def call(fn: NodeFn, channels: Mapping[str, Any], run: RunContext,
         cfg: Mapping[str, Any] | None = None) -> Writes:
    """Run one node outside a graph, as the runner would: each channel it reads from
    ``channels`` (absent: None, or the parameter's default if it has one)."""
    reads = _READS.get(fn)
    if reads is None:
        reads = _READS[fn] = Reads(fn)
    values = {c: channels.get(c) for c in reads.channels
              if c in channels or c not in reads.optional}
    if reads.run:
        values["run"] = run
    if reads.cfg:
        values["cfg"] = dict(cfg or {})
    out: Writes = fn(**values)
    return out
