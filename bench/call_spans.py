"""Where a tool call's CPU goes on the server's serving thread, span by span: the SDK's
transport and dispatch, argument validation, our tool function, the graph run (and its
stages within it), and each pass over the reply. The thread's CPU time
(``time.thread_time``) is summed around each span, so the figures barely move with the
machine's load.

Run from the repository root, on a store kept by ``ingest_query.py --keep`` (or built
with the same turns: ``make_turns``'s seed and session size)::

    python bench/call_spans.py /tmp/steno-bench-xxxx/raw-20000 \\
        --repo base=/path/to/other/checkout --repo new=. [--calls 600]

For each checkout and each kind of call (call_instructions.py's: the floor, a call
rejected by argument validation; new turns ingested; query_history in a session; ...)
a server of its own (``python -m stenographer``, on a copy of the store) is spoken to
with the raw JSON-RPC client; this file, run with ``--serve``, is that server's entry
point: it wraps the functions of ``SPANS`` with counters before serving, and writes the
counts when it exits. A span of an ``async`` function counts the thread's CPU from its
call to its return, so it holds what the event loop ran while it waited (the reply's
write, for ``_write_result``). Spans nest: the graph run is inside the tool's run.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import inspect
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

# (label, module, attribute path): what is counted, outermost first
SPANS = (
    ("transport: parse a line", "stenographer.stdio", "parse"),
    ("dispatcher: handle a request", "mcp.shared.jsonrpc_dispatcher",
     "JSONRPCDispatcher._handle_request"),
    ("  runner: the request", "mcp.server.runner", "ServerRunner._on_request"),
    ("    SDK: request surface check", "mcp_types.methods", "validate_client_request"),
    ("    tool: StenoServer.call_tool", "stenographer.protocol_errors",
     "StenoServer.call_tool"),
    ("      SDK: argument validation", "mcp.server.mcpserver.utilities.func_metadata",
     "FuncMetadata.validate_arguments"),
    ("      SDK: the tool function", "mcp.server.mcpserver.utilities.func_metadata",
     "FuncMetadata.call_fn"),
    ("        graph run (Graphs.run)", "graphs.runner", "Graphs.run"),
    # the rest of the run is the engine between the stages and the runner around it
    ("          its stages, each with its adapter", "graphs.runner", "_FnNode.run"),
    ("        reply: model built and dumped", "stenographer.server", "_result"),
    ("      SDK: output check", "mcp.server.mcpserver.utilities.func_metadata",
     "FuncMetadata.convert_result"),
    ("    SDK: result to the wire form", "mcp.server.runner", "ServerRunner._serialize"),
    ("      SDK: result surface check", "mcp_types.methods", "serialize_server_result"),
    ("  dispatcher: write the result", "mcp.shared.jsonrpc_dispatcher",
     "JSONRPCDispatcher._write_result"),
    ("    transport: dump a message", "stenographer.stdio", "_dump"),
)
SERVING = "serving thread, all"


def _wrap(counts: dict[str, list[float]], label: str, module: str, path: str,
          serving: int) -> None:
    """Count ``module.path`` under ``label`` when the ``serving`` thread runs it (the
    background threads' graph runs, a recovery's or a job's, are not counted)."""
    owner: Any = importlib.import_module(module)
    *outer, name = path.split(".")
    for part in outer:
        owner = getattr(owner, part)
    fn = getattr(owner, name)
    entry = counts.setdefault(label, [0, 0.0])

    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def counted_async(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() != serving:
                return await fn(*args, **kwargs)
            started = time.thread_time()
            try:
                return await fn(*args, **kwargs)
            finally:
                entry[0] += 1
                entry[1] += time.thread_time() - started
        setattr(owner, name, counted_async)
    else:
        @functools.wraps(fn)
        def counted(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() != serving:
                return fn(*args, **kwargs)
            started = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                entry[0] += 1
                entry[1] += time.thread_time() - started
        setattr(owner, name, counted)


def serve(out: Path) -> None:
    """The server, its spans counted: SIGUSR1 starts the count again, SIGUSR2 writes it
    to ``out`` (JSON), with the serving thread's CPU since the start."""
    counts: dict[str, list[float]] = {}
    for label, module, path in SPANS:
        _wrap(counts, label, module, path, threading.get_ident())
    started = [time.thread_time()]

    def zero(*_: Any) -> None:  # signal handlers run on the main (serving) thread
        for entry in counts.values():
            entry[:] = [0, 0.0]
        started[0] = time.thread_time()

    def write(*_: Any) -> None:
        found = {**counts, SERVING: [1, time.thread_time() - started[0]]}
        partial = out.with_suffix(".partial")
        partial.write_text(json.dumps(found))
        partial.replace(out)

    signal.signal(signal.SIGUSR1, zero)
    signal.signal(signal.SIGUSR2, write)
    from stenographer.serve_cli import main as serve_main

    serve_main([])


def measure(repo: Path, store: Path, tool: str, todo: list[dict[str, Any]], warm: int
            ) -> dict[str, tuple[int, float]]:
    """Microseconds of the serving thread per call in each span, over the calls after
    the first ``warm``."""
    from common import RawClient
    from ingest_query import FLOOR_CALL

    with tempfile.TemporaryDirectory(prefix="steno-call-spans-") as tmp:
        root = Path(tmp)
        data = root / "data"
        data.mkdir()
        shutil.copy(store / "steno.db", data / "steno.db")
        out = root / "spans.json"
        argv = [sys.executable, str(Path(__file__).resolve()), "--serve", str(out)]
        with RawClient(data, repo=repo, argv=argv) as raw:
            for arguments in todo[:warm]:
                raw.call(tool, arguments)
            # A handler runs on the serving thread once it wakes (at the latest, for the
            # next line read, before that line is handled).
            os.kill(raw.pid, signal.SIGUSR1)
            for arguments in todo[warm:]:
                raw.call(tool, arguments)
            os.kill(raw.pid, signal.SIGUSR2)
            raw.call(*FLOOR_CALL)
            for _ in range(100):
                if out.exists():
                    break
                time.sleep(0.05)
            found = json.loads(out.read_text())
    n = len(todo) - warm
    return {label: (int(count), cpu / n * 1e6) for label, (count, cpu) in found.items()}


def main(argv: list[str] | None = None) -> int:
    if argv is None and sys.argv[1:2] == ["--serve"]:
        serve(Path(sys.argv[2]))
        return 0
    from call_instructions import _TOOL, KINDS, plan
    from common import REPO_ROOT, bytecode_caches, kept_store_parser, print_table

    p = kept_store_parser(
        __doc__, "a kept store directory (steno.db)",
        "NAME=PATH of a checkout to measure (repeatable; default this one)")
    p.add_argument("--calls", type=int, default=600, help="calls counted per tool (600)")
    p.add_argument("--tools", default="floor,ingest,query_history",
                   help=f"comma-separated, of: {', '.join(KINDS)}")
    args = p.parse_args(argv)
    kinds = args.tools.split(",")
    if unknown := sorted(set(kinds) - set(KINDS)):
        p.error(f"unknown tools {unknown}; valid: {', '.join(KINDS)}")
    repos = args.repo or [("this", REPO_ROOT)]
    warm = 20
    todo = plan(args.store, argparse.Namespace(**{**vars(args), "calls": args.calls + warm}))
    load = [os.getloadavg()[0]]
    rows = []
    with bytecode_caches():
        for kind in kinds:
            found = {name: measure(repo, args.store, _TOOL[kind],
                                  todo[kind][:warm + args.calls], warm)
                     for name, repo in repos}
            load.append(os.getloadavg()[0])
            for label in (SERVING, *(label for label, _, _ in SPANS)):
                rows.append([kind, label, *(f"{found[name].get(label, (0, 0.0))[1]:.1f}"
                                            for name, _ in repos)])
    print_table(["tool", "span (serving thread)", *(f"{name} µs/call" for name, _ in repos)],
                rows, title=f"serving thread CPU per call by span ({args.calls} calls "
                            f"after {warm} to warm up) on {args.store}")
    print(f"load average (1 min) {min(load):.2f}-{max(load):.2f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
