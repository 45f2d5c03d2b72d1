"""Start-up: spawn -> first tool reply over stdio against the floors of this machine,
and a fresh process opening the application and running one graph, for one or more
checkouts side by side (spawns alternate, so each checkout sees the same load).

Run from the repository root::

    python bench/startup.py --repo base=/path/to/other/checkout --repo new=. [--spawns 7]

``stdio`` part (``--part stdio``): the server spawned as an MCP host spawns it, spoken
to with a raw JSON-RPC client (``common.RawClient``): handshake, then one
``stenographer_ingest_exchange`` on a fresh data directory; timed from just before the
spawn to that reply, with the server's CPU (user + system, all threads) at the reply.
Each checkout is started two ways: ``python -m stenographer`` (what ``config`` prints
and what the other benchmarks spawn) and ``python -m stenographer serve`` (the
``stenographer serve`` command). Measured interleaved with them, the floors: ``python
-c pass`` (the interpreter), ``python -c "import mcp.server.mcpserver"`` (the MCP
SDK's import) and a bare ``MCPServer`` with one no-op tool spawned and called the same
way (the SDK's own spawn -> first reply: nothing of ours can be faster).

``graph`` part (``--part graph``): each spawn is ``python -c`` with ``PYTHONPATH`` set
to the checkout: it opens the application on a fresh data directory
(``stenographer.app.open_app``) and runs the ``search`` graph once (as the first
``stenographer_query_history`` call would), then the ``ingest`` graph once in another
spawn. Reported per checkout and graph: wall time and CPU time (user + system) from
interpreter start to the run's end, and how many modules were imported and whether
networkx was among them.

``instructions`` part (``--part instructions``, not in ``both``: minutes per spawn):
the bare server and each checkout's ``python -m stenographer`` spawned under valgrind's
callgrind, handshake and first call as in the ``stdio`` part, and the instructions the
server ran (all threads) counted up to the reply (``callgrind_control -d``). A count
does not depend on the machine's load, where CPU time on two shared cores varies by a
fifth from run to run; ``PYTHONHASHSEED`` is fixed so that runs repeat.

Medians throughout; CPU is the steadier figure on a busy machine. The load average is
printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    REPO_ROOT,
    RawClient,
    bytecode_caches,
    print_table,
    process_cpu_s,
    repo_arg,
)

CHILD = """
import json, resource, sys, tempfile, time
t0 = time.perf_counter()
from pathlib import Path
from stenographer.app import open_app
from stenographer.settings import Settings
app = open_app(Settings(data_dir=Path(tempfile.mkdtemp())))
app.run(sys.argv[1], json.loads(sys.argv[2]))
wall = time.perf_counter() - t0
r = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"wall_ms": wall * 1e3, "cpu_ms": (r.ru_utime + r.ru_stime) * 1e3,
                  "modules": len(sys.modules), "networkx": "networkx" in sys.modules}))
app.close()
"""

RUNS: dict[str, dict[str, object]] = {
    "search": {"query": "redis cache", "cross_session": True},
    "ingest": {"role": "user", "content": "We decided to use Redis for the cache.",
               "session_id": "startup"},
}


def spawn(repo: Path, graph: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(repo)}
    env.pop("OMEGA_STENOGRAPHER_DIR", None)
    out = subprocess.run([sys.executable, "-c", CHILD, graph, json.dumps(RUNS[graph])],
                         cwd=repo, env=env, capture_output=True, text=True, check=True)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


# The floor server: the MCP SDK's MCPServer with one tool that does nothing.
NOOP_SERVER = Path(__file__).resolve().parent / "noop_server.py"
FIRST_INGEST: tuple[str, dict[str, object]] = ("stenographer_ingest_exchange", RUNS["ingest"])


def _exit_run(argv: list[str]) -> dict[str, float]:
    """Wall and CPU time of a command that exits by itself."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_ms": wall * 1e3, "cpu_ms": cpu * 1e3}


def _first_reply(root: Path, argv: list[str] | None, repo: Path,
                 call: tuple[str, dict[str, object]]) -> dict[str, float]:
    """Spawn a stdio server, shake hands, call one tool: spawn -> reply and server CPU."""
    data_dir = Path(tempfile.mkdtemp(dir=root))
    with RawClient(data_dir, repo=repo, argv=argv) as raw:
        _, result = raw.call(*call)
        cpu = process_cpu_s(raw.pid)
        if "error" in result or result.get("isError"):
            raise RuntimeError(f"the first call failed: {result}")
        return {"wall_ms": raw.first_reply_s * 1e3, "handshake_ms": raw.handshake_s * 1e3,
                "cpu_ms": (cpu or float("nan")) * 1e3}


def stdio_part(repos: list[tuple[str, Path]], spawns: int) -> None:
    py = sys.executable
    probes: dict[str, Callable[[Path], dict[str, float]]] = {
        "floor: python -c pass": lambda _: _exit_run([py, "-c", "pass"]),
        "floor: import mcp.server.mcpserver":
            lambda _: _exit_run([py, "-c", "import mcp.server.mcpserver"]),
        "floor: bare MCPServer, no-op tool": lambda root: _first_reply(
            root, [py, str(NOOP_SERVER)], REPO_ROOT, ("noop", {})),
    }
    for name, path in repos:
        probes[f"{name}: python -m stenographer"] = (
            lambda root, path=path: _first_reply(root, None, path, FIRST_INGEST))
        probes[f"{name}: python -m stenographer serve"] = (
            lambda root, path=path: _first_reply(
                root, [py, "-m", "stenographer", "serve"], path, FIRST_INGEST))
    found: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="steno-startup-") as tmp:
        for probe in probes.values():  # untimed: writes the bytecode caches
            probe(Path(tmp))
        for i in range(spawns):
            order = list(probes.items())
            for label, probe in (order if i % 2 == 0 else order[::-1]):
                found.setdefault(label, []).append(probe(Path(tmp)))
    bare = found["floor: bare MCPServer, no-op tool"]
    floor = statistics.median(r["wall_ms"] for r in bare)
    floor_cpu = statistics.median(r["cpu_ms"] for r in bare)
    rows = []
    for label, runs in found.items():
        wall = statistics.median(r["wall_ms"] for r in runs)
        shake = [r["handshake_ms"] for r in runs if "handshake_ms" in r]
        cpu = statistics.median(r["cpu_ms"] for r in runs)
        rows.append([label, str(len(runs)), f"{wall:.0f} ms",
                     f"{statistics.median(shake):.0f} ms" if shake else "",
                     f"{cpu:.0f} ms", f"{wall / floor:.2f}", f"{cpu / floor_cpu:.2f}",
                     f"{min(r['wall_ms'] for r in runs):.0f}-"
                     f"{max(r['wall_ms'] for r in runs):.0f} ms"])
    print_table(["spawn -> first tool reply (stdio, raw client)", "spawns", "wall p50",
                 "handshake p50", "CPU p50", "wall / bare", "CPU / bare", "wall range"], rows)
    print("(the exit-by-itself floors: wall and CPU to the process's exit)")


def graph_part(repos: list[tuple[str, Path]], spawns: int) -> None:
    found: dict[tuple[str, str], list[dict[str, float]]] = {}
    for _, path in repos:  # untimed: writes the bytecode caches
        spawn(path, "ingest")
    for i in range(spawns):
        for graph in RUNS:
            order = repos if i % 2 == 0 else repos[::-1]
            for name, path in order:
                found.setdefault((graph, name), []).append(spawn(path, graph))
    rows = []
    for (graph, name), runs in found.items():
        rows.append([graph, name, str(len(runs)),
                     f"{statistics.median(r['wall_ms'] for r in runs):.0f} ms",
                     f"{statistics.median(r['cpu_ms'] for r in runs):.0f} ms",
                     f"{runs[-1]['modules']:.0f}", "yes" if runs[-1]["networkx"] else "no"])
    print_table(["graph", "checkout", "spawns", "wall p50", "CPU p50", "modules", "networkx"],
                rows)


def _instructions(argv: list[str], repo: Path, call: tuple[str, dict[str, object]]) -> float:
    """Instructions a server spawned under callgrind ran up to its first tool reply."""
    with tempfile.TemporaryDirectory(prefix="steno-callgrind-") as tmp:
        out = Path(tmp) / "callgrind.out"
        command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *argv]
        with RawClient(Path(tmp) / "data", repo=repo, argv=command,
                       extra_env={"PYTHONHASHSEED": "0"}) as raw:
            _, result = raw.call(*call)
            if "error" in result or result.get("isError"):
                raise RuntimeError(f"the first call failed: {result}")
            # the counts so far, written to callgrind.out.1 (the rest at exit)
            subprocess.run(["callgrind_control", "--dump", str(raw.pid)], check=True,
                           capture_output=True)
        with open(f"{out}.1", encoding="utf-8") as dump:
            for line in dump:
                if line.startswith(("summary:", "totals:")):
                    return float(line.split()[1])
    raise RuntimeError("callgrind wrote no total")


def instructions_part(repos: list[tuple[str, Path]], spawns: int) -> None:
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("--part instructions needs valgrind (callgrind) installed")
    py = sys.executable
    probes: dict[str, Callable[[], float]] = {"floor: bare MCPServer, no-op tool": lambda: (
        _instructions([py, str(NOOP_SERVER)], REPO_ROOT, ("noop", {})))}
    for name, path in repos:
        probes[f"{name}: python -m stenographer"] = (lambda path=path: _instructions(
            [py, "-m", "stenographer"], path, FIRST_INGEST))
    with tempfile.TemporaryDirectory(prefix="steno-startup-") as tmp:
        # untimed, without valgrind: writes the bytecode caches
        _first_reply(Path(tmp), [py, str(NOOP_SERVER)], REPO_ROOT, ("noop", {}))
        for _, path in repos:
            _first_reply(Path(tmp), None, path, FIRST_INGEST)
    found: dict[str, list[float]] = {}
    for i in range(spawns):
        order = list(probes.items())
        for label, probe in (order if i % 2 == 0 else order[::-1]):
            found.setdefault(label, []).append(probe())
    floor = statistics.median(found["floor: bare MCPServer, no-op tool"])
    rows = [[label, str(len(counts)), f"{statistics.median(counts) / 1e6:,.0f} M",
             f"{statistics.median(counts) / floor:.3f}",
             f"{(statistics.median(counts) - floor) / 1e6:+,.0f} M"]
            for label, counts in found.items()]
    print_table(["spawn -> first tool reply, instructions (callgrind)", "spawns",
                 "instructions p50", "/ bare", "over bare"], rows)


def _load(when: str) -> None:
    one, five, _ = os.getloadavg()
    print(f"load average {when}: {one:.2f} (1 min), {five:.2f} (5 min) on "
          f"{os.cpu_count()} CPUs", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repo", type=repo_arg, action="append",
                   help="NAME=PATH of a checkout (default: this one)")
    p.add_argument("--spawns", type=int, default=7, help="spawns per checkout and probe (7)")
    p.add_argument("--part", choices=("stdio", "graph", "both", "instructions"),
                   default="both", help="which measurements (both: stdio and graph)")
    args = p.parse_args()
    repos = args.repo or [("this", REPO_ROOT)]
    # Every spawn reads bytecode caches (common.bytecode_caches), written by a first
    # untimed spawn of each kind.
    with bytecode_caches():
        _load("before")
        if args.part in ("stdio", "both"):
            stdio_part(repos, args.spawns)
        if args.part in ("graph", "both"):
            graph_part(repos, args.spawns)
        if args.part == "instructions":
            instructions_part(repos, args.spawns)
        _load("after")


if __name__ == "__main__":
    main()
