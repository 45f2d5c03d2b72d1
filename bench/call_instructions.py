"""Instructions per tool call over stdio, counted by valgrind's callgrind: the per-call
cost of each tool beside its floor (a call rejected by argument validation), for one or
more checkouts on the same kept store, independent of the machine's load.

Run from the repository root, on a store kept by ``ingest_query.py --keep`` (or built
with the same turns: ``make_turns``'s seed and session size)::

    python bench/call_instructions.py /tmp/steno-bench-xxxx/raw-20000 \\
        --repo base=/path/to/other/checkout --repo new=. [--calls 100]

Each checkout's server (``python -m stenographer``) runs under callgrind on its own copy
of the store, spoken to with the raw JSON-RPC client (``common.RawClient``). For each
tool: a few warm-up calls, the counters zeroed (``callgrind_control --zero``), ``--calls``
calls, the counts dumped (``--dump``). Threads are counted apart
(``--separate-threads``): the figure is the serving thread's (the event loop, where the
SDK, our tools and their graphs run), with the other threads' beside it (stage traces
written in the background, whose share per call grows with valgrind's slowdown, since
they wake on wall-clock time). A capture_status call first waits for the store and the
graphs to open, so that no count holds the opening. Compare checkouts at the same
``--calls``: short runs vary more (30 calls: the floor by a fifth between runs; 100
calls: 2.12-2.13 M in four runs). ``PYTHONHASHSEED`` is fixed so that runs repeat.

The tools are ingest_query.py's: the floor (stenographer_get_brief with an empty
session_id), stenographer_ingest_exchange (new turns in sessions of their own),
query_history in a session, compact_guard with a query, and a store-wide search.
Callgrind runs a server about fifty times slower: ~2 minutes of start-up, then ~1 s an
ingest and ~2 s a read, per checkout (the checkouts run one after the other).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO_ROOT, RawClient, bytecode_caches, kept_store_parser, print_table
from ingest_query import FLOOR_CALL, GUARD, INGEST, QUERY, STATUS, make_turns
from reads_ab import WIDE, _exchange_ids, calls

KINDS = ("floor", "ingest", "query_history", "compact_guard", "store-wide search")
_TOOL = {"floor": FLOOR_CALL[0], "ingest": INGEST, "query_history": QUERY,
         "compact_guard": GUARD, "store-wide search": QUERY}
WARM = 5  # calls before the counters are zeroed


def plan(store: Path, args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    """The calls of each kind: WARM + ``args.calls`` of them."""
    n = WARM + args.calls
    turns = make_turns(args.turns, session_turns=args.session_turns, seed=args.seed)
    ids = _exchange_ids(store / "steno.db", turns)
    reads = calls(turns, ids, queries=n, briefs=1, guards=n, seed=args.seed + 100)
    extra = make_turns(args.turns + n, session_turns=args.session_turns,
                       seed=args.seed + 1)[args.turns:]
    return {
        "floor": [FLOOR_CALL[1]] * n,
        "ingest": [{"role": t.role, "content": t.content, "session_id": f"cg-{t.session}",
                    "created_at": t.created_at} for t in extra],
        "query_history": reads[QUERY],
        "compact_guard": reads[GUARD],
        "store-wide search": (reads[WIDE] * n)[:n],
    }


def _totals(directory: Path, part: int) -> dict[str, int]:
    """Instructions by thread in dump ``part`` (callgrind names threads 01, 02, ...)."""
    found = {}
    for path in directory.glob(f"callgrind.out.*.{part}-*"):
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith("totals:"):
                found[path.name.rsplit("-", 1)[1]] = int(line.split()[1])
    return found


def count(repo: Path, store: Path, todo: dict[str, list[dict[str, Any]]], kinds: list[str]
          ) -> dict[str, dict[str, float]]:
    """Instructions per call of each kind: the serving thread's and the others'."""
    with tempfile.TemporaryDirectory(prefix="steno-call-instructions-") as tmp:
        root = Path(tmp)
        data = root / "data"
        data.mkdir()
        shutil.copy(store / "steno.db", data / "steno.db")
        if (store / "steno.db.keywords").is_dir():
            shutil.copytree(store / "steno.db.keywords", data / "steno.db.keywords")
        argv = ["valgrind", "--tool=callgrind", "--separate-threads=yes",
                f"--callgrind-out-file={root / 'callgrind.out'}.%p",
                sys.executable, "-m", "stenographer"]
        out: dict[str, dict[str, float]] = {}
        with RawClient(data, repo=repo, argv=argv,
                       extra_env={"PYTHONHASHSEED": "0"}) as raw:
            # a call that waits for the store and the graphs to open (a thread of their
            # own after the handshake), so that no count holds the opening
            raw.call(STATUS, {})
            for part, kind in enumerate(kinds, start=1):
                for arguments in todo[kind][:WARM]:
                    raw.call(_TOOL[kind], arguments)
                subprocess.run(["callgrind_control", "--zero", str(raw.pid)], check=True,
                               capture_output=True)
                measured = todo[kind][WARM:]
                for arguments in measured:
                    raw.call(_TOOL[kind], arguments)
                subprocess.run(["callgrind_control", "--dump", str(raw.pid)], check=True,
                               capture_output=True)
                for _ in range(100):  # the dump is written by the server's own threads
                    totals = _totals(root, part)
                    if "01" in totals:
                        break
                    time.sleep(0.2)
                else:
                    raise RuntimeError(f"callgrind wrote no dump for {kind}")
                serving = totals.pop("01")
                out[kind] = {"serving": serving / len(measured),
                             "other_threads": sum(totals.values()) / len(measured)}
                print(f"  {repo}: {kind}: {serving / len(measured) / 1e6:.2f} M instructions "
                      "a call", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    p = kept_store_parser(
        __doc__, "a kept store directory (steno.db)",
        "NAME=PATH of a checkout to count (repeatable; default this one)")
    p.add_argument("--calls", type=int, default=100, help="calls counted per tool (100)")
    p.add_argument("--tools", default=",".join(KINDS),
                   help=f"comma-separated, of: {', '.join(KINDS)}")
    args = p.parse_args(argv)
    kinds = args.tools.split(",")
    if unknown := sorted(set(kinds) - set(KINDS)):
        p.error(f"unknown tools {unknown}; valid: {', '.join(KINDS)}")
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("this benchmark needs valgrind (callgrind) installed")
    repos = args.repo or [("this", REPO_ROOT)]
    todo = plan(args.store, args)
    load = [os.getloadavg()[0]]
    counted: dict[str, dict[str, dict[str, float]]] = {}
    with bytecode_caches():
        for name, repo in repos:
            counted[name] = count(repo, args.store, todo, kinds)
            load.append(os.getloadavg()[0])
    rows = []
    for kind in kinds:
        for name, _ in repos:
            c = counted[name][kind]
            floor = counted[name].get("floor", {}).get("serving")
            rows.append([kind, name, f"{c['serving'] / 1e6:.2f} M",
                         f"{c['serving'] / floor:.2f}x" if floor else "",
                         f"{c['other_threads'] / 1e6:.2f} M"])
    print_table(["tool", "checkout", "serving thread / call", "/ floor",
                 "other threads / call"], rows,
                title=f"instructions per tool call over stdio (callgrind, {args.calls} calls "
                      f"each) on {args.store}")
    print(f"load average (1 min) {min(load):.2f}-{max(load):.2f} on {os.cpu_count()} CPUs "
          "(counts do not depend on it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
