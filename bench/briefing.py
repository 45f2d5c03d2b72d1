"""Compaction that forgets nothing: what the SessionStart briefing brings back, how fast.

Run from the repository root::

    python bench/briefing.py [--samples 30] [--sessions 10] [--reuse DIR]

* recall: generated coding sessions of 200 and of 2,000 turns (Claude Code transcripts,
  captured as the hooks capture them) with decisions, blockers (about half fixed by a
  later turn) and milestones scattered through them, in sentence forms that the
  extractors' labelled cases show are recognised (``tests/nodes/extract/
  signal_cases.jsonl``), varied, with filler turns between them. After a compaction the
  briefing is what ``stenographer hook claude-code`` prints for SessionStart
  source=compact (default budget, STENO_BRIEFING_CHARS 6,000); an item counts as cited
  when a ``- #id`` line of the briefing names its turn. Reported: the share of
  milestones, of open blockers, of fixed blockers wrongly listed as open, and of
  decisions by age (turns before the compaction), plus the decisions about what the
  last requests are about.
* latency from process start: the hook as the host runs it (the ``stenographer``
  console script beside this interpreter), on a store of 2,000 turns (one session) and
  of 20,000 turns (ten sessions of 2,000); SessionStart compact of a 2,000-turn session
  and startup in a directory with five previous sessions. Wall time p50/p95 and the
  child's CPU time (user+sys), with the load average: on a shared machine the wall time
  follows the load, the CPU time much less.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from nodes.extract.signals import blockers as extract_blockers  # noqa: E402
from nodes.extract.signals import decisions as extract_decisions  # noqa: E402
from stenographer.app import App, open_app  # noqa: E402
from stenographer.capture import Capturer, discover  # noqa: E402
from stenographer.settings import Settings  # noqa: E402
from tests.capture.transcripts import ClaudeTranscript  # noqa: E402

PROJECT = "/home/me/work/app"
AGE_BUCKETS = (50, 200, 500, 1_000, 2_000)

NAMES = """kestrel osprey heron plover curlew dunlin godwit merlin harrier shrike wren
thrush linnet siskin bunting pipit swift martin swallow lapwing avocet gannet petrel
fulmar tern skua puffin guillemot razorbill eider scoter smew goosander teal wigeon
pintail shoveler gadwall pochard scaup""".split()
PARTS = """exporter importer scheduler cursor indexer tokenizer watcher publisher
compressor migrator resolver uploader router parser renderer validator""".split()
TECHS = """zstd lz4 msgpack protobuf sqlite postgres redis nats httpx aiohttp uvloop
orjson pydantic attrs ruff mypy hypothesis tox nox uv""".split()
FILES = """store/db.py store/search.py nodes/context.py graphs/runner.py stenographer/cli.py
store/cursors.py nodes/extract/terms.py stenographer/http.py""".split()

DECISIONS = [
    "We decided to use {tech} in the {c}.",
    "Decision: the {c} keeps its state in {tech}.",
    "We went with {tech} for the {c}; it is boring.",
    "I chose {tech} over {tech2} for the {c}.",
    "We opted for {tech} in the {c}.",
    "Settled on {tech} for the {c} after the benchmark.",
    "Going with {tech} for the {c}.",
    "We'll use {tech} for the {c} and keep {tech2} optional.",
    "Key finding: the {c} spends most of its time in {tech}.",
    "After profiling, we decided to add a cache in front of the {c}.",
    "We agreed to ship the {c} before the {c2}.",
    "Final decision: the {c} stays synchronous.",
    "Picked {tech} over {tech2} for the {c}.",
    "Conclusion: the {c} is the bottleneck, not {tech}.",
]
BLOCKERS = [  # (blocker, its fix), both about the same thing
    ("I'm stuck on the flaky test_{id}: it times out on CI.",
     "Fixed the flaky test_{id} by seeding the RNG."),
    ("The {c} build is failing on CI.", "The {c} build is fixed now."),
    ("Can't connect to the {c} service from the runner.",
     "Resolved the {c} service connection: the runner had the wrong port."),
    ("The {c} crashed again with a KeyError in load_{id}.",
     "This patch fixes the KeyError in load_{id}."),
    ("The upload from the {c} keeps failing with HTTP 413.",
     "Fixed the 413 from the {c} upload by raising the body limit."),
    ("Blocked on the missing {c} credentials.", "The missing {c} credentials are resolved."),
    ("The {c} worker hangs when the queue is empty.",
     "Fixed the {c} worker hang: it drains the queue first."),
]
USER_FILLER = [
    "Show me how the {c} reads its settings.",
    "Open {file} and walk me through the main loop.",
    "What does run_{id}() return for an empty batch?",
    "Let's look at {file} next.",
    "Rename the helper in {file} to something clearer.",
    "Add a docstring to the {c} entry point.",
]
ASSISTANT_FILLER = [
    "The {c} reads its settings once at start and keeps them in a frozen object.",
    "Here is the loop in {file}: it pages through the cursor table 500 rows at a time.",
    "run_{id}() returns an empty list for an empty batch.",
    "I added a docstring to the {c} entry point and renamed two variables.",
    "The {c} hands each batch to the next stage and records how long it took.",
]
CODE = ("\n```python\ndef run_{id}(rows):\n    out = []\n    for row in rows:\n"
        "        out.append(row)\n    return out\n```\n")


@dataclass
class Plan:
    """A generated session: what each turn says and which turns carry what."""

    session: str
    turns: list[tuple[str, str]] = field(default_factory=list)  # (role, text)
    decisions: list[int] = field(default_factory=list)  # turn indexes
    topic_decisions: list[int] = field(default_factory=list)
    blockers: dict[int, int | None] = field(default_factory=dict)  # blocker -> its fix
    milestones: list[int] = field(default_factory=list)


def generate(session: str, n_turns: int, rng: random.Random) -> Plan:
    """A coding session of ``n_turns`` turns; one decision per ~20 turns, a blocker per
    ~45 (about half fixed 10-300 turns later), a milestone per ~250, three decisions
    about the topic of the last requests at old ages."""
    plan = Plan(session)
    names = rng.sample(NAMES, len(NAMES))
    comps = [f"{n} {p}" for n in names for p in PARTS]
    rng.shuffle(comps)
    topic = comps.pop()
    slots: dict[int, tuple[str, str]] = {}
    pending_fixes: dict[int, str] = {}

    def free(lo: int, hi: int) -> int | None:
        if hi <= lo:
            return None
        for _ in range(50):
            at = rng.randrange(lo, hi)
            if at not in slots and at % 2 == 1:  # assistant turns
                return at
        return None

    for k, frac in enumerate((0.05, 0.35, 0.65)):
        at = free(int(n_turns * frac), int(n_turns * frac) + 40)
        if at is not None:
            template = DECISIONS[(k * 5) % len(DECISIONS)]
            slots[at] = ("topic", template.format(tech=rng.choice(TECHS), tech2="json",
                                                  c=topic, c2=comps[0]))
    for _ in range(n_turns // 20):
        at = free(1, n_turns - 12)
        if at is None:
            continue
        tech, tech2 = rng.sample(TECHS, 2)
        slots[at] = ("decision", rng.choice(DECISIONS).format(
            tech=tech, tech2=tech2, c=comps.pop(), c2=comps[-1]))
    for b in range(max(2, n_turns // 45)):
        at = free(1, n_turns - 12)
        if at is None:
            continue
        blocker, fix = rng.choice(BLOCKERS)
        values = {"c": comps.pop(), "id": f"{names[b % len(names)]}_{b}"}
        slots[at] = ("blocker", blocker.format(**values))
        fixed_at = free(at + 10, min(n_turns - 12, at + 300)) if b % 2 == 0 else None
        if fixed_at is not None:
            slots[fixed_at] = ("fix", fix.format(**values))
            pending_fixes[at] = str(fixed_at)
        else:
            pending_fixes[at] = ""
    for _ in range(max(1, n_turns // 250)):
        at = free(1, n_turns - 12)
        if at is not None:
            slots[at] = ("milestone", f"The {comps.pop()} passes its end-to-end test on CI.")
    asks = [f"Let's get back to the {topic}: make its retries configurable.",
            f"Show me where the {topic} reads its timeout.",
            f"Add a test for the {topic} retry path."]
    for i in range(n_turns):
        role = "user" if i % 2 == 0 else "assistant"
        values = {"c": rng.choice(comps), "file": rng.choice(FILES), "id": f"{i}"}
        if i >= n_turns - 6 and role == "user":
            text = asks[(n_turns - 1 - i) // 2 % len(asks)]
        elif i in slots:
            kind, text = slots[i]
            {"decision": plan.decisions, "topic": plan.topic_decisions,
             "milestone": plan.milestones}.get(kind, []).append(i)
            if kind == "blocker":
                fixed = pending_fixes[i]
                plan.blockers[i] = int(fixed) if fixed else None
        elif role == "user":
            text = rng.choice(USER_FILLER).format(**values)
        else:
            text = rng.choice(ASSISTANT_FILLER).format(**values)
            if rng.random() < 0.3:
                text += CODE.format(**values)
        plan.turns.append((role, text))
    return plan


def write(root: Path, plan: Plan, cwd: str) -> None:
    t = ClaudeTranscript(root, session=plan.session,
                         project=cwd.replace("/", "-"), cwd=cwd)
    t.append(*(t.user(text) if role == "user" else t.assistant(text)
               for role, text in plan.turns))


def check_extraction(plans: list[Plan]) -> str:
    """How many planted sentences the extractors find, and the unplanted signals."""
    planted = found = noise = 0
    for plan in plans:
        marked = set(plan.decisions) | set(plan.topic_decisions) | set(plan.blockers)
        for i, (_, text) in enumerate(plan.turns):
            d, b = extract_decisions(text), extract_blockers(text)
            if i in marked:
                planted += 1
                found += bool(d if i not in plan.blockers else b)
            elif d or b:
                noise += 1
    return (f"extractors find {found}/{planted} planted decisions and blockers; "
            f"{noise} other turns hold a signal")


def build_store(root: Path, plans: list[tuple[Plan, str]]) -> float:
    """Capture the sessions' transcripts into root/data; mark the milestones."""
    claude = root / "claude"
    for plan, cwd in plans:
        write(claude, plan, cwd)
    started = time.perf_counter()
    app = open_app(Settings(data_dir=root / "data", shared_dir=None))
    try:
        report = Capturer(app).run_pass(discover(("claude-code",), claude, root / "codex"))
        assert not report.errors, report.text()
        for plan, _ in plans:
            ids = turn_ids(app, plan)
            for i in plan.milestones:
                app.run("milestone", {"session_id": f"claude-code:{plan.session}",
                                      "exchange_id": ids[i], "label": "works end to end"})
    finally:
        app.close()
    return time.perf_counter() - started


def turn_ids(app: App, plan: Plan) -> list[int]:
    with app.store.read() as conn:
        rows = [int(r[0]) for r in conn.execute(
            "SELECT e.id FROM exchanges e JOIN sessions s ON s.id = e.session_id "
            "WHERE s.name = ? ORDER BY e.id", (f"claude-code:{plan.session}",))]
    assert len(rows) == len(plan.turns), (len(rows), len(plan.turns))
    return rows


def hook_command() -> list[str]:
    script = Path(sys.executable).parent / "stenographer"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "stenographer"]


def run_hook(data: Path, payload: dict[str, Any]) -> tuple[float, float, str]:
    """(wall seconds, child CPU seconds, stdout) of one hook process."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(data.parent),
           "OMEGA_STENOGRAPHER_DIR": str(data), "PYTHONPATH": str(REPO_ROOT)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run([*hook_command(), "hook", "claude-code"], input=json.dumps(payload),
                          capture_output=True, text=True, env=env, cwd=data.parent,
                          timeout=120, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.stdout


def briefing(data: Path, plan: Plan, source: str = "compact", cwd: str = PROJECT) -> str:
    _, _, out = run_hook(data, {"session_id": plan.session, "hook_event_name": "SessionStart",
                                "source": source, "cwd": cwd})
    return str(json.loads(out)["hookSpecificOutput"]["additionalContext"]) if out else ""


CITE = re.compile(r"^- #(\d+)\b", re.M)


@dataclass
class Tally:
    hit: int = 0
    total: int = 0

    def add(self, cited: bool) -> None:
        self.total += 1
        self.hit += cited

    def __str__(self) -> str:
        if not self.total:
            return "—"
        return f"{self.hit}/{self.total} ({100 * self.hit / self.total:.0f}%)"


def recall(data: Path, plans: list[Plan], label: str) -> None:
    app = open_app(Settings(data_dir=data, shared_dir=None))
    try:
        ids = {p.session: turn_ids(app, p) for p in plans}
    finally:
        app.close()
    milestones, open_, wrongly_open, topic = Tally(), Tally(), Tally(), Tally()
    by_age = {bucket: Tally() for bucket in AGE_BUCKETS}
    sizes = []
    for plan in plans:
        text = briefing(data, plan)
        sizes.append(len(text))
        cited = {int(i) for i in CITE.findall(text)}
        open_section = re.search(r"^## Open blockers.*?\n((?:- .*\n?)*)", text, re.M)
        listed_open = {int(i) for i in CITE.findall(open_section.group(1))} if open_section \
            else set()
        turn = ids[plan.session]
        n = len(plan.turns)
        for i in plan.milestones:
            milestones.add(turn[i] in cited)
        for i, fix in plan.blockers.items():
            if fix is None:
                open_.add(turn[i] in listed_open)
            else:
                wrongly_open.add(turn[i] in listed_open)
        for i in plan.decisions:
            age = n - 1 - i
            bucket = next(b for b in AGE_BUCKETS if age < b)
            by_age[bucket].add(turn[i] in cited)
        for i in plan.topic_decisions:
            topic.add(turn[i] in cited)
    print(f"\n{label}: {len(plans)} sessions, briefing {min(sizes):,}-{max(sizes):,} "
          "characters (budget 6,000)")
    print(f"  milestones cited            {milestones}")
    print(f"  open blockers listed open   {open_}")
    print(f"  fixed blockers listed open  {wrongly_open}")
    print(f"  decisions about the last requests' topic cited  {topic}")
    lo = 0
    for bucket in AGE_BUCKETS:
        if by_age[bucket].total:
            print(f"  decisions {lo:>5}-{bucket - 1:<5} turns old cited  {by_age[bucket]}")
        lo = bucket


def percentiles(values: list[float]) -> str:
    xs = sorted(values)
    p95 = xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]
    return f"p50 {statistics.median(xs) * 1e3:4.0f} ms  p95 {p95 * 1e3:4.0f} ms"


def latency(data: Path, plan: Plan, turns: int, samples: int) -> None:
    cases = {"compact (2,000-turn session)": {"session_id": plan.session, "source": "compact"},
             "startup (previous sessions)": {"session_id": "0" * 8 + "-new-session",
                                             "source": "startup"}}
    run_hook(data, {**cases["startup (previous sessions)"], "hook_event_name": "SessionStart",
                    "cwd": PROJECT})  # warm the page cache once
    for name, payload in cases.items():
        walls, cpus = [], []
        for _ in range(samples):
            wall, cpu, out = run_hook(data, {**payload, "hook_event_name": "SessionStart",
                                             "cwd": PROJECT})
            assert out, "the hook printed nothing"
            walls.append(wall)
            cpus.append(cpu)
        print(f"  {turns:>6,} turns, {name:<30} wall {percentiles(walls)}  "
              f"CPU {percentiles(cpus)}  (load {os.getloadavg()[0]:.1f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=30, help="hook runs per case")
    parser.add_argument("--sessions", type=int, default=10,
                        help="sessions per size (the large store holds this many x 2,000)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--reuse", help="keep the generated stores in this directory")
    parser.add_argument("--part", choices=("all", "recall", "latency"), default="all")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, hook: "
          f"{' '.join(hook_command())}")
    rng = random.Random(args.seed)
    small = [generate(f"00000000-0000-4000-8000-{k:012d}", 200, rng)
             for k in range(args.sessions)]
    large = [generate(f"11111111-0000-4000-8000-{k:012d}", 2_000, rng)
             for k in range(args.sessions)]
    print(check_extraction(small + large))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.reuse) if args.reuse else Path(tmp)
        stores = {"small": root / "s200", "one": root / "s2000", "many": root / "s20000"}
        for name, plans in (("small", [(p, PROJECT) for p in small]),
                            ("one", [(large[0], PROJECT)]),
                            ("many", [(p, PROJECT if k < 5 else f"/home/me/other{k}")
                                      for k, p in enumerate(large)])):
            if not (stores[name] / "data" / "steno.db").exists():
                took = build_store(stores[name], plans)
                turns = sum(len(p.turns) for p, _ in plans)
                print(f"built {name}: {turns:,} turns in {took:.0f} s "
                      f"({turns / took:.0f} turns/s)")
        if args.part in ("all", "recall"):
            recall(stores["small"] / "data", small, "200-turn sessions")
            recall(stores["many"] / "data", large, "2,000-turn sessions")
        if args.part in ("all", "latency"):
            print("\nlatency of `stenographer hook claude-code` (SessionStart), from "
                  "process start:")
            latency(stores["one"] / "data", large[0], 2_000, args.samples)
            latency(stores["many"] / "data", large[0], 20_000, args.samples)


if __name__ == "__main__":
    main()
