"""The graph runner: compiles each definition once and runs it with a stage trace.

A node is a plain function whose parameters name the channels it reads
(``nodes/context.py``); its signature is read once, when its type is bound
(``Reads``), and the adapter around it (``_FnNode``) passes it those channels' values,
the run context and its configuration as keyword arguments. A graph compiles on its
first run when the ``Graphs`` has a loader (``graphs/registry.py``); a node's module is
imported when a node of its type first runs (``_Type``), so a graph with routes imports
only what the routes taken need.

The trace is recorded in one place, ``_FnNode.run`` (the adapter around every node),
and never by nodes; what it says of each value written and of an error comes from
``graphs.summary`` (kind and size, never text). Runs are synchronous (``engine.run``)
on the caller's thread, with a fresh id per run and no checkpoint store (see
docs/neograph.md: rules 1-4). The engine's ``run_stream`` events were measured as the
trace's source and not used: they carry no time and no exception object, copy every
value once more, and cost more than the adapter (docs/neograph.md, "The stage trace").

The same adapter keeps bulk values out of the engine's state (rule 5): every crossing
of a channel value into or out of the engine is a deep JSON copy, so lists, dicts and
long strings (a turn's content, candidate lists, hit pages) stay in a per-run table and
the engine carries a short token for each. Nodes and route conditions read the real
values through the adapter; they never see a token. An append channel's list is held
element by element, so the engine's append reducer still concatenates. A graph that
loops (pages, batches) overwrites the same channels on every pass: a value a top-level
node overwrites is released at once, so a long loop holds one pass's values, not all.
Values written inside an embedded subgraph are released with the run (its channels
may hand a value on to the parent's).

A caller may observe a run as it goes: ``observe(stage, writes)`` is called after each
stage that succeeded, with its trace record and the values it wrote (a command's
progress bar advances per batch of a looping graph this way).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import itertools
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import neograph_engine as ng

from graphs.summary import error_summary, value_summary
from nodes.context import NodeFn, Reads, RunContext, Writes, bulk_allocations, call

__all__ = ["Graphs", "Loader", "Observer", "Reads", "Trace", "call"]

Trace = dict[str, Any]
TraceSink = Callable[[RunContext, Trace, float], None]
Observer = Callable[[dict[str, Any], Writes], None]
# what a graph needs to compile, by name: its definition and step limit (None: default)
Loader = Callable[[str], tuple[dict[str, Any], int | None]]
_HELD = "\x1fheld:"  # prefix of a held value's token: a control character no node writes
_SHORT = 64  # strings up to this length cross the engine as they are


class _Held:
    """Values held outside the engine for the runs in flight, by token."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.by_run: dict[str, list[str]] = {}
        self.recent: dict[str, dict[str, list[str]]] = {}  # run → channel → tokens
        self._serial = itertools.count()

    def _hold(self, run_id: str, value: Any) -> Any:
        if value is None or isinstance(value, (bool, int, float)) or (
                isinstance(value, str) and len(value) <= _SHORT and not value.startswith(_HELD)):
            return value
        token = f"{_HELD}{next(self._serial)}"
        self.values[token] = value
        self.by_run.setdefault(run_id, []).append(token)
        return token

    def write(self, run_id: str, channel: str, value: Any, appends: frozenset[str],
              flat: bool = False) -> Any:
        """What the engine carries for ``value`` written to ``channel``; ``appends`` are
        the graph's append channels. In a ``flat`` graph (no subgraph sharing channel
        names) an overwritten value is let go once it is two writes old, so that a
        graph looping over batches holds one or two batches, not all of them."""
        if channel in appends and isinstance(value, list):
            return [self._hold(run_id, item) for item in value]
        token = self._hold(run_id, value)
        if flat and isinstance(token, str) and token.startswith(_HELD):
            recent = self.recent.setdefault(run_id, {}).setdefault(channel, [])
            recent.append(token)
            if len(recent) > 2:  # the one before stays for a reader in the same step
                self.values.pop(recent.pop(0), None)
        return token

    def read(self, value: Any) -> Any:
        """The real value behind what the engine returned for a channel."""
        if isinstance(value, str):
            return self.values[value] if value.startswith(_HELD) else value
        if isinstance(value, list) and value and isinstance(value[0], str):
            return [self.read(item) for item in value]
        return value

    def release(self, run_id: str) -> None:
        for token in self.by_run.pop(run_id, ()):
            self.values.pop(token, None)
        self.recent.pop(run_id, None)


def _all_channels(definition: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The channels of a definition and of the subgraphs it embeds."""
    found = list(definition.get("channels", {}).items())
    for node in definition.get("nodes", {}).values():
        if node.get("type") == "subgraph":
            found += _all_channels(node["definition"])
    return found


class _Compiling:
    """What the nodes of a graph being compiled need to know of it."""

    __slots__ = ("appends", "channels", "flat")

    def __init__(self, appends: frozenset[str], channels: frozenset[str], flat: bool) -> None:
        self.appends, self.channels, self.flat = appends, channels, flat


class _Type:
    """A node type: its function and what it reads. A type registered by module is
    bound when a node of it first runs, importing its module then: a graph imports only
    the modules of the stages its runs reach (the hook's briefing route never imports
    the capture route's)."""

    __slots__ = ("fn", "graphs", "name", "reads")

    def __init__(self, graphs: Graphs, name: str, fn: NodeFn | None) -> None:
        self.graphs, self.name, self.fn = graphs, name, fn
        self.reads = None if fn is None else Reads(fn)

    def bound(self) -> tuple[NodeFn, Reads]:
        if self.fn is None or self.reads is None:
            importlib.import_module(self.graphs.modules[self.name])
            fn = self.graphs.node_types[self.name]
            self.reads, self.fn = Reads(fn), fn
        return self.fn, self.reads


class _FnNode(ng.GraphNode):  # type: ignore[misc]
    def __init__(self, graphs: Graphs, name: str, kind: _Type, cfg: Mapping[str, Any],
                 compiling: _Compiling) -> None:
        super().__init__()
        self.graphs, self.name, self.kind, self.cfg = graphs, name, kind, dict(cfg)
        self.appends, self.flat, self.known = compiling.appends, compiling.flat, compiling.channels
        self.fn: NodeFn | None = None
        self.channels: tuple[str, ...] = ()
        self.keywords: dict[str, Any] = {}
        self.wants_run = False
        if kind.fn is not None:
            self._bind()

    def _bind(self) -> NodeFn:
        fn, reads = self.kind.bound()
        # the channels passed, in parameter order (an optional one only if the graph has it)
        self.channels = tuple(c for c in reads.channels
                              if c not in reads.optional or c in self.known)
        self.keywords = {"cfg": self.cfg} if reads.cfg else {}
        self.wants_run = reads.run
        self.fn = fn
        return fn

    def get_name(self) -> str:
        return self.name

    def run(self, inp: Any) -> list[Any]:
        graphs, ctx = self.graphs, inp.ctx
        run_id = ctx.run_id
        rec: dict[str, Any] = {"node": self.name, "step": ctx.step, "writes": {},
                               "error": None}
        started = time.perf_counter()
        try:
            fn = self.fn or self._bind()
            held, get = graphs.held, inp.state.get
            values = {c: held.read(get(c)) for c in self.channels}
            if self.wants_run:
                values["run"] = graphs.run_context(run_id, self.name)
            out: Writes = fn(**values, **self.keywords)
            rec["writes"] = {k: value_summary(v) for k, v in out.items()}
            write, appends, flat = held.write, self.appends, self.flat
            writes = [ng.ChannelWrite(k, write(run_id, k, v, appends, flat))
                      for k, v in out.items()]
            if graphs.observers:
                observe = graphs.observers.get(run_id)
                if observe is not None:
                    observe(rec, out)
            return writes
        except Exception as ex:
            rec["error"] = error_summary(ex)
            failed = graphs.failed.get(run_id)
            if failed is not None:
                failed.setdefault(self.name, []).append(str(ex))
            raise
        finally:
            rec["duration_ms"] = round((time.perf_counter() - started) * 1e3, 3)
            graphs.stages.setdefault(run_id, []).append(rec)


class Graphs:
    """One per process: the node types, the compiled graphs and the traces in flight.

    With a ``loader``, a graph is compiled on its first run (``loader(name)`` gives its
    definition and step limit); ``compile`` compiles one at once. Node types come from
    ``node_types`` (name → function, e.g. ``nodes.context.NODES``) as graphs name them,
    or from ``node_type``; a type not in ``node_types`` yet whose module ``modules``
    names (name → module) is imported when a node of it first runs."""

    def __init__(self, trace_sink: TraceSink | None = None, loader: Loader | None = None,
                 node_types: Mapping[str, NodeFn] | None = None,
                 modules: Mapping[str, str] | None = None,
                 bulk: frozenset[str] = frozenset()) -> None:
        self.registry = ng.GraphRegistry()
        self.engines: dict[str, Any] = {}
        self.definitions: dict[str, dict[str, Any]] = {}
        self.stages: dict[str, list[dict[str, Any]]] = {}
        self.contexts: dict[str, RunContext] = {}
        self.failed: dict[str, dict[str, list[str]]] = {}  # run → node → messages
        self.observers: dict[str, Observer] = {}
        self.trace_sink = trace_sink
        self.held = _Held()
        self.appends: dict[str, frozenset[str]] = {}
        self.loader, self.node_types = loader, node_types if node_types is not None else {}
        self.modules = modules or {}
        self.types: dict[str, NodeFn | None] = {}  # registered (None: bound on first run)
        self._kinds: dict[str, _Type] = {}
        self.retries: dict[str, dict[str, ng.RetryPolicy]] = {}  # graph → node → policy
        self._compiling: _Compiling | None = None  # the graph being compiled
        self._lock = threading.RLock()  # one graph compiles at a time
        self.max_steps: dict[str, int] = {}  # graphs that loop longer than the default
        self.bulk = bulk  # graphs whose runs pause the cyclic garbage collector

    def node_type(self, type_name: str, fn: NodeFn | None) -> None:
        """Register ``fn`` as the node type ``type_name``; its signature is read once.
        ``None``: the function of its module (``modules``), imported on first run."""
        if type_name in self.types:
            if self.types[type_name] is not fn:
                raise ValueError(f"node type {type_name!r} is registered already")
            return
        kind = _Type(self, type_name, fn)
        self.types[type_name] = fn
        self._kinds[type_name] = kind
        self.registry.register_type(
            type_name, lambda name, cfg, _ctx: _FnNode(self, name, kind, cfg or {},
                                                       self._graph_now()))

    def _graph_now(self) -> _Compiling:
        if self._compiling is None:
            raise RuntimeError("graph nodes are built only while a graph compiles")
        return self._compiling

    def condition(self, name: str, fn: Callable[..., str]) -> None:
        """Register a route condition; its parameters name the channels it reads."""
        reads, held = Reads(fn).channels, self.held
        self.registry.register_condition(
            name, lambda state: fn(*[held.read(state.get(c)) for c in reads]))

    def _types_of(self, definition: Mapping[str, Any]) -> None:
        """Register the node types ``definition`` (and any subgraph in it) names."""
        for spec in definition.get("nodes", {}).values():
            kind = spec.get("type")
            if kind == "subgraph":
                self._types_of(spec["definition"])
            elif kind not in self.types and kind in self.node_types:
                self.node_type(kind, self.node_types[kind])
            elif kind not in self.types and kind in self.modules:
                self.node_type(kind, None)

    def compile(self, definition: dict[str, Any], max_steps: int | None = None) -> None:
        with self._lock:
            self._compile(definition, max_steps)

    def _compile(self, definition: dict[str, Any], max_steps: int | None) -> None:
        self._types_of(definition)
        found = _all_channels(definition)
        kinds = {(name, spec.get("reducer") == "append") for name, spec in found}
        appends = frozenset(name for name, append in kinds if append)
        if clash := sorted(appends & {name for name, append in kinds if not append}):
            raise ValueError(f"{definition['name']}: channels {clash} are append channels "
                             "in one part of the graph and overwrite channels in another")
        flat = not any(node.get("type") == "subgraph"
                       for node in definition.get("nodes", {}).values())
        self._compiling = _Compiling(appends, frozenset(name for name, _ in found), flat)
        try:
            engine = ng.GraphEngine.compile(
                definition, ng.NodeContext(), registry=self.registry, stderr_notices=False
            )
        finally:
            self._compiling = None
        name = definition["name"]
        for node, policy in self.retries.get(name, {}).items():
            engine.set_node_retry_policy(node, policy)
        self.appends[name] = appends
        if max_steps is not None:
            self.max_steps[name] = max_steps
        self.definitions[name] = definition
        self.engines[name] = engine  # last: a run on another thread may look for it

    def engine(self, graph: str) -> Any:
        """The compiled graph, compiled now if this is its first use."""
        engine = self.engines.get(graph)
        if engine is not None:
            return engine
        if self.loader is None:
            raise KeyError(f"no graph named {graph!r} is compiled")
        with self._lock:
            if graph not in self.engines:
                self.compile(*self.loader(graph))
        return self.engines[graph]

    def prepare(self, graph: str) -> None:
        """Compile ``graph`` and import the modules of all its node types (those of
        every route), so that its first run pays for neither."""
        self.engine(graph)
        self._bind_all(self.definitions[graph])

    def _bind_all(self, definition: Mapping[str, Any]) -> None:
        for spec in definition.get("nodes", {}).values():
            if spec.get("type") == "subgraph":
                self._bind_all(spec["definition"])
            else:
                self._kinds[spec["type"]].bound()

    def retry(self, graph: str, node: str, retries: int, first_s: float, cap_s: float,
              jitter: float) -> None:
        """The engine's retry policy on one node of a graph (applied when it compiles,
        or now if it has): ``retries`` more attempts after a retryable failure, the
        first ``first_s`` seconds later, each wait doubled up to ``cap_s``, spread by
        ± ``jitter`` (a fraction: the engine's ``jitter_pct`` is one too, despite its
        name)."""
        policy = ng.RetryPolicy()
        policy.max_retries = retries
        policy.initial_delay_ms = round(first_s * 1e3)
        policy.backoff_multiplier = 2.0
        policy.max_delay_ms = round(cap_s * 1e3)
        policy.jitter_pct = jitter
        self.retries.setdefault(graph, {})[node] = policy
        if graph in self.engines:
            self.engines[graph].set_node_retry_policy(node, policy)

    def run_context(self, run_id: str, node: str) -> RunContext:
        ctx = self.contexts.get(run_id)
        if ctx is None:
            raise RuntimeError(f"{node} takes the run context, and this run has none")
        return ctx

    def run(self, graph: str, inputs: Mapping[str, Any], ctx: RunContext | None,
            observe: Observer | None = None) -> tuple[dict[str, Any], Trace]:
        """Run a graph (compiled on first use); return its channel values and the stage
        trace. ``observe``, when given, is called after each stage that succeeded.
        ``ctx`` None: a run without a store or settings (``doctor``, which must work when
        neither can be opened); its stages take no run context, and its trace is
        returned only, never stored.

        A failing run re-raises the node's exception with ``graph``, ``node`` and
        ``stage_trace`` attached; its trace is persisted like any other.
        """
        engine = self.engine(graph)
        run_id = uuid.uuid4().hex
        failed: dict[str, list[str]] = {}
        self.failed[run_id] = failed
        if ctx is not None:
            self.contexts[run_id] = dataclasses.replace(ctx, failed=failed)
        if observe is not None:
            self.observers[run_id] = observe
        wall, started = time.time(), time.perf_counter()
        status, error = "Failed", None
        try:
            appends = self.appends[graph]
            held = {k: self.held.write(run_id, k, v, appends) for k, v in inputs.items()}
            config = ng.RunConfig(thread_id=run_id, input=held)
            if graph in self.max_steps:
                config.max_steps = self.max_steps[graph]
            with bulk_allocations() if graph in self.bulk else contextlib.nullcontext():
                result = engine.run(config, ng.RunMetadata(run_id=run_id))
            status = result.status.name
            values = {k: self.held.read(v["value"])
                      for k, v in result.output["channels"].items()}
        except Exception as ex:
            error = ex
            raise
        finally:
            self.contexts.pop(run_id, None)
            self.failed.pop(run_id, None)
            self.observers.pop(run_id, None)
            self.held.release(run_id)
            trace: Trace = {
                "run_id": run_id,
                "graph": graph,
                "status": status,
                "duration_ms": round((time.perf_counter() - started) * 1e3, 3),
                "stages": self.stages.pop(run_id, []),
            }
            if error is not None:
                stage = next((s for s in trace["stages"] if s["error"]), None)
                for key, value in (("graph", graph),
                                   ("node", stage["node"] if stage else None)):
                    try:
                        setattr(error, key, value)
                    except AttributeError:
                        pass
                error.stage_trace = trace  # type: ignore[attr-defined]
            if self.trace_sink is not None and ctx is not None:
                self.trace_sink(ctx, trace, wall)
        return values, trace
