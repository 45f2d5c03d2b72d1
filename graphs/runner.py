"""The graph runner: compiles each definition once and runs it with a stage trace.

The trace is recorded in one place, ``_FnNode.run`` (the adapter around every node),
and never by nodes. Runs are synchronous (``engine.run``) on the caller's thread, with a
fresh id per run and no checkpoint store (see docs/neograph.md: rules 1-4).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import neograph_engine as ng

from nodes.context import NodeFn, RunContext, Writes

__all__ = ["Graphs", "Trace"]

Trace = dict[str, Any]
TraceSink = Callable[[RunContext, Trace, float], None]
_SUMMARY_CHARS = 80


def _summary(value: Any) -> str:
    """A short description of a channel write: small values in full, large ones by size."""
    if isinstance(value, str):
        text = json.dumps(value[:_SUMMARY_CHARS], ensure_ascii=False)
    elif isinstance(value, list) and value:
        text = f"[{len(value)} items]"
    elif isinstance(value, dict) and len(value) > 4:
        text = "{" + ", ".join(list(value)[:8]) + ("…}" if len(value) > 8 else "}")
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            text = repr(value)
    return text if len(text) <= _SUMMARY_CHARS else text[: _SUMMARY_CHARS - 1] + "…"


class _View:
    """What a node sees as ``state``: channel reads and the run context."""

    __slots__ = ("ctx", "get")

    def __init__(self, get: Callable[[str], Any], ctx: RunContext) -> None:
        self.get = get
        self.ctx = ctx


class _FnNode(ng.GraphNode):  # type: ignore[misc]
    def __init__(self, graphs: Graphs, name: str, fn: NodeFn, cfg: Mapping[str, Any]) -> None:
        super().__init__()
        self.graphs, self.name, self.fn, self.cfg = graphs, name, fn, dict(cfg)

    def get_name(self) -> str:
        return self.name

    def run(self, inp: Any) -> list[Any]:
        run_id = inp.ctx.run_id
        rec: dict[str, Any] = {"node": self.name, "step": inp.ctx.step, "writes": {},
                               "error": None}
        started = time.perf_counter()
        try:
            out: Writes = self.fn(_View(inp.state.get, self.graphs.contexts[run_id]), self.cfg)
            rec["writes"] = {k: _summary(v) for k, v in out.items()}
            return [ng.ChannelWrite(k, v) for k, v in out.items()]
        except Exception as ex:
            rec["error"] = f"{type(ex).__name__}: {ex}"[:500]
            raise
        finally:
            rec["duration_ms"] = round((time.perf_counter() - started) * 1e3, 3)
            self.graphs.stages.setdefault(run_id, []).append(rec)


class Graphs:
    """One per process: the node types, the compiled graphs and the traces in flight."""

    def __init__(self, trace_sink: TraceSink | None = None) -> None:
        self.registry = ng.GraphRegistry()
        self.engines: dict[str, Any] = {}
        self.definitions: dict[str, dict[str, Any]] = {}
        self.stages: dict[str, list[dict[str, Any]]] = {}
        self.contexts: dict[str, RunContext] = {}
        self.trace_sink = trace_sink
        self.max_steps: dict[str, int] = {}  # graphs that loop longer than the default
        self._lock = threading.Lock()

    def node_type(self, type_name: str, fn: NodeFn) -> None:
        self.registry.register_type(
            type_name, lambda name, cfg, _ctx: _FnNode(self, name, fn, cfg or {})
        )

    def condition(self, name: str, fn: Callable[[Any], str]) -> None:
        self.registry.register_condition(name, fn)

    def compile(self, definition: dict[str, Any], max_steps: int | None = None) -> None:
        engine = ng.GraphEngine.compile(
            definition, ng.NodeContext(), registry=self.registry, stderr_notices=False
        )
        self.engines[definition["name"]] = engine
        if max_steps is not None:
            self.max_steps[definition["name"]] = max_steps
        self.definitions[definition["name"]] = definition

    def run(self, graph: str, inputs: Mapping[str, Any], ctx: RunContext
            ) -> tuple[dict[str, Any], Trace]:
        """Run a compiled graph; return its channel values and the stage trace.

        A failing run re-raises the node's exception with ``graph``, ``node`` and
        ``stage_trace`` attached; its trace is persisted like any other.
        """
        engine = self.engines[graph]
        run_id = uuid.uuid4().hex
        self.contexts[run_id] = ctx
        wall, started = time.time(), time.perf_counter()
        status, error = "Failed", None
        try:
            config = ng.RunConfig(thread_id=run_id, input=dict(inputs))
            if graph in self.max_steps:
                config.max_steps = self.max_steps[graph]
            result = engine.run(config, ng.RunMetadata(run_id=run_id))
            status = result.status.name
            values = {k: v["value"] for k, v in result.output["channels"].items()}
        except Exception as ex:
            error = ex
            raise
        finally:
            self.contexts.pop(run_id, None)
            trace: Trace = {
                "run_id": run_id,
                "graph": graph,
                "status": status,
                "duration_ms": round((time.perf_counter() - started) * 1e3, 3),
                "stages": self.stages.pop(run_id, []),
            }
            if error is not None:
                failed = next((s for s in trace["stages"] if s["error"]), None)
                for key, value in (("graph", graph),
                                   ("node", failed["node"] if failed else None)):
                    try:
                        setattr(error, key, value)
                    except AttributeError:
                        pass
                error.stage_trace = trace  # type: ignore[attr-defined]
            if self.trace_sink is not None:
                self.trace_sink(ctx, trace, wall)
        return values, trace
