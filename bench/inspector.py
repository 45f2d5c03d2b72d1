"""How fast the browser inspector loads over a large store.

Run from the repository root::

    python bench/inspector.py                 # 20,000 turns, 100 sessions
    python bench/inspector.py --turns 2000    # quicker
    python bench/inspector.py --out FILE.json

1. Seeds a fresh store with ``--turns`` turns through the ingest graph in-process
   (``App.run("ingest", ...)``: extraction, indexing and compression as in production);
   the seeding time is printed on its own.
2. Starts the standalone inspector (``serve_inspector`` in a subprocess on a random
   loopback port) and times with httpx: the first (cold) requests of a page load — the
   HTML, then ``api/sessions`` — and then every endpoint warm (median and p95 of
   ``--repeats`` requests each).
3. With Playwright and Debian's Chromium (``/usr/bin/chromium``) available, loads the page
   ``--browser-loads`` times in headless Chromium and reports the navigation timing
   (response end, DOMContentLoaded, load event) and when the sessions table was rendered
   (the page's ``inspector:ready`` performance mark); the same for a search view.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
from common import REPO_ROOT, percentile, print_table

from stenographer.app import open_app
from stenographer.settings import Settings

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
START_TIMEOUT_S = 120.0

WORDS = ("cache queue schema index parser token webhook tenant snapshot retry cursor "
         "payload manifest quota backfill deploy canary rollout ledger gateway scheduler "
         "worker pipeline dashboard migration checksum replica shard latency budget").split()
TECH = ("Postgres SQLite Redis Kafka DuckDB ClickHouse Nginx gRPC FastAPI Terraform").split()


def turn_text(rng: random.Random, i: int) -> str:
    """~300 characters of work talk; about 1 in 10 has a decision, 1 in 10 a blocker."""
    words = " ".join(rng.choice(WORDS) for _ in range(40))
    kind = i % 10
    if kind == 0:
        return f"We decided to use {rng.choice(TECH)} for the {rng.choice(WORDS)}. {words}"
    if kind == 5:
        return f"The {rng.choice(WORDS)} job is failing with a timeout. {words}"
    return f"Turn {i}: {words}."


def seed(data_dir: Path, turns: int, sessions: int) -> dict[str, Any]:
    rng = random.Random(7)
    app = open_app(Settings(data_dir=data_dir))
    started = time.perf_counter()
    try:
        per_session = max(1, turns // sessions)
        for i in range(turns):
            app.run("ingest", {
                "role": ("user", "assistant", "tool")[i % 3], "content": turn_text(rng, i),
                "session_id": f"session-{i // per_session:04d}",
                "created_at": f"2026-10-{1 + i * 28 // turns:02d}T{i % 24:02d}:00:00Z"})
    finally:
        app.close()
    seconds = time.perf_counter() - started
    return {"turns": turns, "sessions": sessions, "seconds": seconds,
            "turns_per_s": turns / seconds}


class Inspector:
    """``serve_inspector(settings, port=0)`` in a subprocess; the URL read from stderr."""

    def __init__(self, data_dir: Path) -> None:
        code = ("from stenographer.inspector import serve_inspector\n"
                "from stenographer.settings import Settings\n"
                "serve_inspector(Settings.from_env(), port=0)\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("STENO_")}
        env.update(OMEGA_STENOGRAPHER_DIR=str(data_dir), PYTHONPATH=str(REPO_ROOT))
        self.started = time.perf_counter()
        self.proc = subprocess.Popen([sys.executable, "-c", code], env=env,
                                     cwd=str(REPO_ROOT), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
        lines: queue.Queue[str | None] = queue.Queue()

        def read() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                lines.put(line)
            lines.put(None)

        self.reader = threading.Thread(target=read, daemon=True)
        self.reader.start()
        while True:
            line = lines.get(timeout=START_TIMEOUT_S)
            if line is None:
                raise SystemExit("the inspector exited before it printed its address")
            found = re.search(r"http://127\.0\.0\.1:\d+/", line)
            if found:
                self.url = found.group()
                self.start_s = time.perf_counter() - self.started
                return

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=15)
        self.reader.join(timeout=15)


def timed_get(client: httpx.Client, path: str) -> tuple[float, int]:
    started = time.perf_counter()
    res = client.get(path)
    elapsed = (time.perf_counter() - started) * 1e3
    if res.status_code != 200:
        raise SystemExit(f"GET {path}: {res.status_code} {res.text[:300]}")
    return elapsed, len(res.content)


def http_figures(url: str, repeats: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with httpx.Client(base_url=url, timeout=60) as client:
        # What a first visit costs: the page, then the call it makes on load.
        html_ms, html_bytes = timed_get(client, "")
        sessions_ms, sessions_bytes = timed_get(client, "api/sessions?limit=200")
        out["cold"] = {"html_ms": html_ms, "sessions_ms": sessions_ms,
                       "page_load_ms": html_ms + sessions_ms, "html_bytes": html_bytes,
                       "sessions_bytes": sessions_bytes}
        first = client.get("api/sessions?limit=1").json()["sessions"][0]["session_id"]
        exchange_id = client.get("api/sessions?limit=1").json()["counts"]["exchanges"] // 2
        run_id = client.get("api/runs?graph=ingest&limit=1").json()["runs"][0]["run_id"]
        brief = client.get(f"api/notes/{first}").json()["briefs"][0]["id"]
        paths = {
            "page HTML": "",
            "api/sessions (200)": "api/sessions?limit=200",
            "api/runs (100)": "api/runs?limit=100",
            "api/runs/{id}": f"api/runs/{run_id}",
            "api/notes/{session}": f"api/notes/{first}",
            "api/search (all sessions)": "api/search?q=timeout+in+the+ledger+job&limit=20",
            "api/search (one session)": f"api/search?q=Postgres&session={first}&limit=20",
            "api/exchange/{id}": f"api/exchange/{exchange_id}",
            "api/briefs/{id}": f"api/briefs/{brief}",
        }
        warm: dict[str, Any] = {}
        for name, path in paths.items():
            times, size = [], 0
            for _ in range(repeats):
                ms, size = timed_get(client, path)
                times.append(ms)
            warm[name] = {"p50_ms": percentile(times, 50), "p95_ms": percentile(times, 95),
                          "bytes": size}
        out["warm"] = warm
        page = warm["page HTML"]["p50_ms"] + warm["api/sessions (200)"]["p50_ms"]
        out["warm_page_load_ms"] = page
    return out


NAV_TIMING = """() => {
  const n = performance.getEntriesByType("navigation")[0];
  const ready = performance.getEntriesByName("inspector:ready");
  return {response_end: n.responseEnd, dom_content_loaded: n.domContentLoadedEventEnd,
          load_event: n.loadEventEnd, ready: ready.length ? ready[0].startTime : null};
}"""


def browser_figures(url: str, loads: int, profile: Path) -> dict[str, Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return {"skipped": "playwright is not installed (pip install -e '.[test]')"}
    if not CHROMIUM.exists():
        return {"skipped": f"{CHROMIUM} is missing (apt-get install -y chromium)"}
    samples: dict[str, list[float]] = {}
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(profile), executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            page = context.new_page()
            page.set_default_timeout(60_000)
            views = {"sessions": url, "search": url + "#/search?q=timeout+ledger"}
            for view, address in views.items():
                for _ in range(loads):
                    page.goto("about:blank")
                    page.goto(address, wait_until="load")
                    # A function, not an expression: the page's CSP forbids eval.
                    page.wait_for_function(
                        "() => performance.getEntriesByName('inspector:ready').length > 0")
                    timing = page.evaluate(NAV_TIMING)
                    for key, value in timing.items():
                        if value is not None:
                            samples.setdefault(f"{view}.{key}", []).append(float(value))
        finally:
            context.close()
    return {key: {"p50_ms": percentile(v, 50), "p95_ms": percentile(v, 95)}
            for key, v in samples.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20_000)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=30, help="warm requests per endpoint")
    parser.add_argument("--browser-loads", type=int, default=10)
    parser.add_argument("--out", type=Path, help="also write the figures as JSON")
    parser.add_argument("--store", type=Path, help=(
        "seed into this directory and keep it; a directory that already holds a store is "
        "reused as it is (no seeding)"))
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="steno-bench-inspector-"))
    store = args.store or work / "store"
    try:
        if (store / "steno.db").exists():
            print(f"Reusing the store in {store} (no seeding)\n", flush=True)
            seeded: dict[str, Any] = {"reused": str(store)}
        else:
            print(f"Seeding {args.turns:,} turns in {args.sessions} sessions through the "
                  "ingest graph (in-process)…", flush=True)
            seeded = seed(store, args.turns, args.sessions)
            print(f"  seeding: {seeded['seconds']:.1f} s "
                  f"({seeded['turns_per_s']:.0f} turns/s)\n")
        inspector = Inspector(store)
        try:
            results: dict[str, Any] = {"seed": seeded, "server_start_s": inspector.start_s}
            results["http"] = http_figures(inspector.url, args.repeats)
            results["browser"] = browser_figures(inspector.url, args.browser_loads,
                                                 work / "profile")
        finally:
            inspector.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    cold = results["http"]["cold"]
    print(f"Inspector start (spawn → listening): {results['server_start_s']:.2f} s")
    print_table(["first visit", "time", "bytes"], [
        ["GET / (HTML)", f"{cold['html_ms']:.1f} ms", f"{cold['html_bytes']:,}"],
        ["GET api/sessions?limit=200", f"{cold['sessions_ms']:.1f} ms",
         f"{cold['sessions_bytes']:,}"],
        ["page load (HTML + first API call)", f"{cold['page_load_ms']:.1f} ms", ""],
    ], title="\nCold (first requests after start)")
    print_table(["endpoint", "p50", "p95", "bytes"], [
        [name, f"{v['p50_ms']:.2f} ms", f"{v['p95_ms']:.2f} ms", f"{v['bytes']:,}"]
        for name, v in results["http"]["warm"].items()
    ], title=f"\nWarm ({args.repeats} requests each, httpx)")
    print(f"warm page load (HTML + api/sessions, p50): "
          f"{results['http']['warm_page_load_ms']:.2f} ms")
    browser = results["browser"]
    if "skipped" in browser:
        print(f"\nBrowser: skipped — {browser['skipped']}")
    else:
        print_table(["headless Chromium", "p50", "p95"], [
            [key, f"{v['p50_ms']:.1f} ms", f"{v['p95_ms']:.1f} ms"]
            for key, v in browser.items()
        ], title=f"\nBrowser ({args.browser_loads} loads per view; ms from navigation start)")
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))
        print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
