"""`stenographer migrate`: copy throughput between SQLite and PostgreSQL.

A SQLite store of ``--turns`` turns with briefs is filled through the store layer
(bench/audit.py's ``fill``: real chain hashes, index entries, briefs and sources). Then
the real command copies it, each direction ``--rounds`` times, alternated:
SQLite → PostgreSQL (a new database each round), PostgreSQL → SQLite (a new file), and
SQLite → SQLite. Reported per direction: the copy's own turns/s (from the command's
JSON, the audit excluded), the whole command's wall time (with the audit of the target
and start-up), and the command's CPU time (user + system, its own process only: the
PostgreSQL server's work is not in it) and peak RSS. The PostgreSQL server is the test
set-up's (tests/pg_server.py: embedded PostgreSQL 18 with pgvector, fsync off).

    python bench/migrate.py [--turns 20000] [--rounds 3] [--batch 500]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.audit import fill  # noqa: E402
from bench.common import fmt_bytes, print_table  # noqa: E402


def migrate(data_dir: Path, *args: str) -> dict[str, Any]:
    """Run the command in a child process; its JSON, wall time, CPU time and peak RSS."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(data_dir.parent),
           "PYTHONPATH": str(REPO_ROOT), "OMEGA_STENOGRAPHER_DIR": str(data_dir)}
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "stenographer", "migrate", *args,
                                 "--json"], cwd=REPO_ROOT, env=env, stdout=out, stderr=err,
                                text=True)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own CPU time and peak RSS
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if not stdout:
        raise SystemExit(f"migrate failed ({proc.returncode}): {stderr[-2000:]}")
    reply = json.loads(stdout)
    if "error" in reply:
        raise SystemExit(f"migrate failed: {reply['error']}")
    return {"reply": reply, "wall": wall, "code": proc.returncode,
            "cpu": usage.ru_utime + usage.ru_stime, "rss": usage.ru_maxrss * 1024}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=500)
    args = parser.parse_args(argv)

    from tests.pg_server import PostgresServer

    root = Path(tempfile.mkdtemp(prefix="steno-bench-migrate-"))
    source = root / "source"
    filled = fill(source / "steno.db", args.turns)
    print(f"filled {args.turns:,} turns in {filled:.1f} s; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    server = PostgresServer().start()
    results: dict[str, list[dict[str, Any]]] = {}
    try:
        for n in range(args.rounds):
            url = server.database()
            batch = ("--batch", str(args.batch))
            runs = {
                "SQLite → PostgreSQL": (source, "--to", url, *batch),
                "PostgreSQL → SQLite": (source, "--from", url, "--to",
                                        str(root / f"back-{n}.db"), *batch),
                "SQLite → SQLite": (source, "--to", str(root / f"copy-{n}.db"), *batch),
            }
            for name, (data_dir, *rest) in runs.items():
                result = migrate(data_dir, *rest)
                copied = result["reply"]["copied"].get("exchanges", 0)
                assert copied == args.turns, (name, result["reply"])
                results.setdefault(name, []).append(result)
                audit = result["reply"]["audit"]
                print(f"round {n + 1}: {name}: {result['reply']['turns_per_second']:,.0f} "
                      f"turns/s, wall {result['wall']:.1f} s, audit "
                      + ("passed" if audit and audit["passed"] else
                         f"not passed ({result['reply']['audit_error'] or 'violations'})"),
                      flush=True)
    finally:
        server.stop()
    rows = []
    for name, runs in results.items():
        rows.append([
            name,
            f"{statistics.median(r['reply']['turns_per_second'] for r in runs):,.0f}",
            f"{statistics.median(r['reply']['seconds'] for r in runs):.1f} s",
            f"{statistics.median(r['wall'] for r in runs):.1f} s",
            f"{statistics.median(r['cpu'] for r in runs):.1f} s",
            fmt_bytes(max(r["rss"] for r in runs)),
        ])
    print_table(["direction", "turns/s (median)", "copy", "command wall", "command CPU",
                 "peak RSS"], rows,
                title=f"\nmigrate {args.turns:,} turns, --batch {args.batch}, "
                      f"{args.rounds} alternated rounds (load average now "
                      f"{os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
