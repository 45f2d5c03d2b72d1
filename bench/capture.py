"""Automatic capture: throughput of a pass, and latency from an append to a search hit.

Run from the repository root::

    python bench/capture.py [--turns 2000] [--files 10] [--samples 30]

* throughput: ``--turns`` user/assistant turns (~300 characters each, among the tool
  calls, thinking and meta records hosts write in between) in ``--files`` transcripts,
  half Claude Code, half Codex CLI; one in-process capture pass (``Capturer.run_pass``:
  one run of the capture graph, each batch of records stored through the batch path in
  one transaction); then a second pass over the
  unchanged files (what a restart costs), and a pass after appending 1 turn per file;
* latency: a real ``stenographer capture --watch`` subprocess with its default interval
  (1 s) and with 0.1 s; one Claude Code record appended at a time, then the store is
  searched (keyword, in this process) every 2 ms until the record's unique word is
  found: p50 / p95 / max over ``--samples`` appends.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.common import worker_cpu_s  # noqa: E402
from stenographer.app import App, open_app  # noqa: E402
from stenographer.capture import Capturer, discover  # noqa: E402
from stenographer.settings import Settings  # noqa: E402
from tests.capture.transcripts import ClaudeTranscript, CodexTranscript  # noqa: E402

WORDS = ("the deploy pipeline caches docker layers in the registry and the integration "
         "tests run against a throwaway postgres; we decided to keep the queue on redis "
         "streams because the consumer groups already fit; blocked on the flaky runner "
         "disk for a while ").split()


def text(n: int) -> str:
    words = [WORDS[(n * 7 + i) % len(WORDS)] for i in range(48)]
    return f"turn {n}: " + " ".join(words)


def write_transcripts(root: Path, turns: int, files: int) -> int:
    claude_dir, codex_dir = root / "claude", root / "codex"
    per_file = turns // files
    raw = 0
    for f in range(files):
        if f % 2 == 0:
            t: ClaudeTranscript | CodexTranscript = ClaudeTranscript(
                claude_dir, session=f"00000000-0000-4000-8000-{f:012d}")
        else:
            t = CodexTranscript(codex_dir, session=f"019a0000-0000-7000-8000-{f:012d}")
            t.append(t.meta())
        chunks = []
        for i in range(per_file // 2):
            n = f * per_file + 2 * i
            chunks += [t.user(text(n)), t.noise() if i % 4 == 0 else "",
                       t.assistant(text(n + 1))]
        t.append(*chunks)
        raw += sum(len(c.encode()) for _, c in t.said)
    return raw


def throughput(turns: int, files: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        raw = write_transcripts(root, turns, files)
        raw_turns = turns // files // 2 * 2 * files
        size = sum(p.stat().st_size for p in root.rglob("*.jsonl"))
        app = open_app(Settings(data_dir=root / "data"))
        try:
            sources = discover(("claude-code", "codex"), root / "claude", root / "codex")
            capturer = Capturer(app)
            started, cpu = time.perf_counter(), time.process_time()
            report = capturer.run_pass(sources)
            first, first_cpu = time.perf_counter() - started, time.process_time() - cpu
            first_worker_cpu = worker_cpu_s(app)  # started by this pass, if at all
            # every turn written is captured (a record refused would be a lost turn)
            assert report.captured == raw_turns, (report.captured, raw_turns)
            started = time.perf_counter()
            again = capturer.run_pass(sources)
            second = time.perf_counter() - started
            for kind, path in sources:
                t = (ClaudeTranscript(root / "claude", session=path.stem)
                     if kind == "claude-code" else None)
                if t is not None:
                    t.append(t.user("one more"))
            started = time.perf_counter()
            third = capturer.run_pass(sources)
            incremental = time.perf_counter() - started
        finally:
            app.close()
    print(f"throughput: {report.captured:,} turns from {len(sources)} files "
          f"({size / 1e6:.1f} MB of JSONL, {raw / 1e6:.2f} MB of turn text)")
    print(f"  first pass   {first:7.2f} s  {report.captured / first:8.0f} turns/s  "
          f"{size / 1e6 / first:6.2f} MB/s of transcript ({first_cpu:.2f} s of CPU: "
          f"{report.captured / first_cpu:,.0f} turns per CPU second; the per-turn "
          f"stages' worker process {first_worker_cpu:.2f} s, "
          f"{report.captured / (first_cpu + first_worker_cpu):,.0f} turns per CPU second "
          f"of both; load {os.getloadavg()[0]:.1f})")
    print(f"  second pass  {second * 1e3:7.1f} ms (nothing new; {again.captured} captured)")
    print(f"  +1 turn in {third.captured} files: {incremental * 1e3:7.1f} ms")


def latency(samples: int, interval: float) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = {**os.environ, "OMEGA_STENOGRAPHER_DIR": str(root / "data"),
               "STENO_CAPTURE_CLAUDE_DIR": str(root / "claude"),
               "STENO_CAPTURE_CODEX_DIR": str(root / "codex"), "PYTHONPATH": str(REPO_ROOT)}
        t = ClaudeTranscript(root / "claude")
        t.append(t.user("warm-up turn"))
        proc = subprocess.Popen(
            [sys.executable, "-m", "stenographer", "capture", "--watch", "--interval",
             str(interval)], cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        app = open_app(Settings(data_dir=root / "data"))
        out: list[float] = []
        try:
            wait_for(app, "warm", 60.0)
            for i in range(samples):
                token = f"zq{i:04d}marker"
                started = time.perf_counter()
                t.append(t.user(f"sample {i} carries the word {token}"))
                out.append(wait_for(app, token, 60.0) - started)
        finally:
            proc.terminate()
            proc.wait(timeout=60)
            app.close()
    return out


def wait_for(app: App, token: str, limit: float) -> float:
    deadline = time.perf_counter() + limit
    while time.perf_counter() < deadline:
        res, _ = app.run("search", {"query": token, "cross_session": True,
                                    "mode": "keyword", "limit": 1})
        if res["hits"]:
            return time.perf_counter()
        time.sleep(0.002)
    raise TimeoutError(f"{token!r} not searchable after {limit} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=2_000)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--samples", type=int, default=30)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    throughput(args.turns, args.files)
    for interval in (1.0, 0.1):
        lat = sorted(latency(args.samples, interval))
        p95 = lat[min(len(lat) - 1, round(0.95 * (len(lat) - 1)))]
        print(f"append -> searchable, watcher interval {interval:g} s: "
              f"p50 {statistics.median(lat) * 1e3:.0f} ms, p95 {p95 * 1e3:.0f} ms, "
              f"max {lat[-1] * 1e3:.0f} ms ({len(lat)} appends)")


if __name__ == "__main__":
    main()
