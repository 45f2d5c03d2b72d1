"""Start-up: a fresh process opens the application and runs one graph, for one or
more checkouts side by side (spawns alternate, so each checkout sees the same load).

Run from the repository root::

    python bench/startup.py --repo base=/path/to/other/checkout --repo new=. [--spawns 7]

Each spawn is ``python -c`` with ``PYTHONPATH`` set to the checkout: it opens the
application on a fresh data directory (``stenographer.app.open_app``) and runs the
``search`` graph once (as the first ``stenographer_query_history`` call would), then
the ``ingest`` graph once in another spawn. Reported per checkout and graph: wall time
and CPU time (user + system) from interpreter start to the run's end (medians), and
how many modules were imported and whether networkx was among them. CPU is the steadier
figure on a busy machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO_ROOT, print_table

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

RUNS = {
    "search": {"query": "redis cache", "cross_session": True},
    "ingest": {"role": "user", "content": "We decided to use Redis for the cache.",
               "session_id": "startup"},
}


def _repo(text: str) -> tuple[str, Path]:
    name, _, path = text.partition("=")
    if not name or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=PATH: {text!r}")
    return name, Path(path).resolve()


def spawn(repo: Path, graph: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(repo)}
    env.pop("OMEGA_STENOGRAPHER_DIR", None)
    out = subprocess.run([sys.executable, "-c", CHILD, graph, json.dumps(RUNS[graph])],
                         cwd=repo, env=env, capture_output=True, text=True, check=True)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repo", type=_repo, action="append",
                   help="NAME=PATH of a checkout (default: this one)")
    p.add_argument("--spawns", type=int, default=7, help="spawns per checkout and graph (7)")
    args = p.parse_args()
    repos = args.repo or [("this", REPO_ROOT)]
    found: dict[tuple[str, str], list[dict[str, float]]] = {}
    for i in range(args.spawns):
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
    load = os.getloadavg()[0]
    print(f"load average (1 min) {load:.2f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
