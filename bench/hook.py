"""`stenographer hook` start-up: what a host waits for, per event, for one or more
checkouts side by side (spawns alternate, so each checkout sees the same load).

Run from the repository root::

    python bench/hook.py --repo base=/path/to/other/checkout --repo new=. [--spawns 20]

Each checkout gets its own data directory and a Claude Code transcript of 400 turns,
captured once by a first Stop hook. Then, per spawn, ``python -m stenographer hook
claude-code`` with the payload on stdin, as the host runs it:

* ``Stop``: two new messages were appended to the transcript; the hook captures them;
* ``SessionStart``: source=compact, the briefing of the session (printed on stdout).

Reported per checkout and event: wall time and CPU time (user + system of the child)
medians, with the load average. CPU is the steadier figure on a busy machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO_ROOT, print_table, repo_arg

from tests.capture.transcripts import ClaudeTranscript

TURNS = 200  # pairs of messages in the transcript before the first spawn


class Checkout:
    """One checkout, its data directory and its transcript."""

    def __init__(self, name: str, repo: Path, root: Path) -> None:
        self.name, self.repo = name, repo
        self.data, self.claude = root / name / "data", root / name / "claude"
        self.transcript = ClaudeTranscript(self.claude)
        for i in range(TURNS):
            self.transcript.append(
                self.transcript.user(f"Step {i}: read the parser of module m{i}."),
                self.transcript.assistant(f"We decided to keep module m{i} line based."))
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(repo),
                    "HOME": str(root / name), "OMEGA_STENOGRAPHER_DIR": str(self.data),
                    "STENO_CAPTURE_CLAUDE_DIR": str(self.claude),
                    "VERITAS_SHARED_DIR": str(root / name / "bus")}
        first = self.hook("Stop")
        if first["code"] != 0 or first["err"]:
            raise SystemExit(f"{name}: the first Stop hook failed: {first['err']}")

    def payload(self, event: str) -> dict[str, Any]:
        t = self.transcript
        extra = {"source": "compact"} if event == "SessionStart" else {
            "stop_hook_active": False}
        return {"session_id": t.session, "transcript_path": str(t.path), "cwd": t.cwd,
                "hook_event_name": event, **extra}

    def hook(self, event: str) -> dict[str, Any]:
        if event == "Stop":
            t = self.transcript
            t.append(t.user("One more step."), t.assistant("We went with zstd level 3."))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "stenographer", "hook", "claude-code"],
                              cwd=self.repo, env=self.env, input=json.dumps(self.payload(event)),
                              capture_output=True, text=True, check=False)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return {"code": proc.returncode, "out": proc.stdout, "err": proc.stderr,
                "wall_ms": wall * 1e3, "cpu_ms": cpu * 1e3}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repo", type=repo_arg, action="append",
                   help="NAME=PATH of a checkout (default: this one)")
    p.add_argument("--spawns", type=int, default=20, help="spawns per checkout and event (20)")
    args = p.parse_args()
    repos = args.repo or [("this", REPO_ROOT)]
    found: dict[tuple[str, str], list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        checkouts = [Checkout(name, path, Path(tmp)) for name, path in repos]
        for i in range(args.spawns):
            for event in ("Stop", "SessionStart"):
                for c in checkouts if i % 2 == 0 else checkouts[::-1]:
                    run = c.hook(event)
                    if run["code"] != 0 or run["err"]:
                        raise SystemExit(f"{c.name} {event}: {run['err']}")
                    if event == "SessionStart" and "additionalContext" not in run["out"]:
                        raise SystemExit(f"{c.name}: SessionStart printed no briefing")
                    found.setdefault((event, c.name), []).append(run)
    rows = [[event, name, str(len(runs)),
             f"{statistics.median(r['wall_ms'] for r in runs):.0f} ms",
             f"{statistics.median(r['cpu_ms'] for r in runs):.0f} ms"]
            for (event, name), runs in sorted(found.items())]
    print_table(["event", "checkout", "spawns", "wall p50", "CPU p50"], rows)
    print(f"load average (1 min) {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
