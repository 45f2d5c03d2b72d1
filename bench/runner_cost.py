"""What the graph engine, the runner and the adapter around each stage cost a tool's
graph run, apart from the stages' own work: in process, on a copy of a kept store, the
thread's CPU time (``time.thread_time``) of

* the real run: ``App.run`` of the tool's graph on call_instructions.py's calls;
* the same graph with each node replaced by a function that returns what its stage
  wrote in one real run (same signature, so the adapter reads the same channels; the
  summaries of the writes, the values held outside the engine, the routes, the engine
  and the runner are unchanged; no stage trace is stored).

The second is what a run would cost if its stages did no work; the first less the
second, what the stages do. Run from the repository root, on a store kept by
``ingest_query.py --keep`` (or built with the same turns)::

    python bench/runner_cost.py /tmp/steno-bench-xxxx/raw-20000 [--runs 2000]
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from call_instructions import plan
from common import kept_store_parser, print_table, served_app

GRAPHS = {"ingest": "ingest", "query_history": "search", "compact_guard": "guard"}
WARM = 50


def _stubbed(app: Any, graph: str, todo: list[dict[str, Any]]) -> Any:
    """A ``Graphs`` whose nodes return the writes of one real run of ``graph`` that took
    the default routes (every stage but the subgraphs: an ingest that did not compress)."""
    from graphs import registry
    from graphs.runner import Graphs
    from nodes.context import NODES

    app.graphs.prepare(graph)  # every node type's module imported: NODES has them all
    definition = registry.definition(graph)
    stages = {name for name, spec in definition["nodes"].items()
              if spec["type"] != "subgraph"}
    wrote: dict[str, dict[str, Any]] = {}

    def observe(stage: dict[str, Any], writes: dict[str, Any]) -> None:
        wrote[stage["node"]] = dict(writes)

    for request in todo:
        wrote.clear()
        app.graphs.run(graph, {"request": request}, app.ctx, observe)
        if set(wrote) == stages:
            break
    else:
        raise SystemExit(f"no run of {graph} took the default routes")
    types = dict(NODES)  # a subgraph's nodes keep theirs: the default routes skip them
    for name, writes in wrote.items():
        kind = definition["nodes"][name]["type"]
        types[kind] = _returning(NODES[kind], writes)
    stubbed = Graphs(node_types=types)
    for condition, fn in registry.CONDITIONS.items():
        stubbed.condition(condition, fn)
    stubbed.compile(definition)
    return stubbed


def _returning(fn: Any, writes: dict[str, Any]) -> Any:
    """A node that returns ``writes``, with ``fn``'s signature (the adapter reads the
    channels ``fn`` reads)."""
    @functools.wraps(fn)
    def stub(*_: Any, **__: Any) -> dict[str, Any]:
        return writes
    return stub


def _cpu_us(run: Any, requests: list[dict[str, Any]]) -> float:
    """Median thread CPU of ``run(request)`` over ``requests``, in µs."""
    spent = []
    for request in requests:
        started = time.thread_time()
        run(request)
        spent.append(time.thread_time() - started)
    return statistics.median(spent) * 1e6


def measure(store: Path, tool: str, todo: list[dict[str, Any]], runs: int
            ) -> tuple[float, float]:
    graph = GRAPHS[tool]
    with served_app(store / "steno.db", "steno-runner-cost-") as app:
        for request in todo[:WARM]:
            app.run(graph, request)
        real = _cpu_us(lambda r: app.run(graph, r), todo[WARM:WARM + runs])
        stubbed = _stubbed(app, graph, todo[WARM + runs:])
        one = {"request": todo[0]}  # read by no stub
        for _ in range(WARM):
            stubbed.run(graph, one, app.ctx)
        empty = _cpu_us(lambda _: stubbed.run(graph, one, app.ctx), [one] * runs)
    return real, empty


def main() -> int:
    p = kept_store_parser(__doc__, "a kept store directory (steno.db)")
    p.add_argument("--runs", type=int, default=1000, help="runs timed per tool (1000)")
    p.add_argument("--tools", default=",".join(GRAPHS),
                   help=f"comma-separated, of: {', '.join(GRAPHS)}")
    args = p.parse_args()
    tools = args.tools.split(",")
    if unknown := sorted(set(tools) - set(GRAPHS)):
        p.error(f"unknown tools {unknown}; valid: {', '.join(GRAPHS)}")
    todo = plan(args.store, argparse.Namespace(**{**vars(args), "calls": args.runs + 2 * WARM}))
    load = [os.getloadavg()[0]]
    rows = []
    for tool in tools:
        real, empty = measure(args.store, tool, todo[tool], args.runs)
        load.append(os.getloadavg()[0])
        rows.append([tool, f"{real:.0f}", f"{empty:.0f}", f"{real - empty:.0f}",
                     f"{empty / real:.0%}"])
    print_table(["tool", "graph run µs", "stages doing nothing µs", "the stages' work µs",
                 "share of engine, runner, adapter"], rows,
                title=f"graph run CPU in process, p50 of {args.runs} runs, on {args.store}")
    print(f"load average (1 min) {min(load):.2f}-{max(load):.2f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
