"""Compaction that forgets nothing: `stenographer hook claude-code` as Claude Code runs it.

Real subprocesses on a real store and a real Claude Code-format transcript: Stop hooks
during the session, a PreCompact with the last five messages not yet captured, then
SessionStart (compact, resume, startup; a session the store never saw) printing the
briefing as the host reads it. Failures (a locked store, corrupt input, a missing
transcript) exit 0 with nothing on stdout and show in `stenographer status`.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

from store.hook_log import hook_log
from tests.capture.test_cli import env, run, stored
from tests.capture.transcripts import ClaudeTranscript, CodexTranscript
from tests.cli.conftest import REPO_ROOT, TIMEOUT, Result

PROJECT = "/home/me/work/app"
OLD_DECISION = "We decided to pin neograph-engine to 0.16.0."
FIXED_BLOCKER = "I'm stuck on the flaky test_sync_pull: it times out on CI."
FIX = "Fixed the flaky test_sync_pull by seeding the RNG."
OPEN_BLOCKER = "The upload keeps failing with HTTP 413."
NEW_DECISION = "We went with zstd level 3 for the export bundles."
SECRET = "ghp_" + "k3J9x2QmL8vR4tY7wZ1pN6sD0fH5gB2cE9aU"
SECRET_DECISION = f"Decision: the release job pushes with the token {SECRET} for now."
LAST_FIVE = [
    ("user", "Now make the upload of large export bundles work through the proxy."),
    ("assistant", NEW_DECISION),
    ("assistant", OPEN_BLOCKER),
    ("user", "Check the proxy body limit for the bundle upload first."),
    ("assistant", "The proxy limit is 10 MB; bundles above that are refused."),
]
NEW_SESSION = "7c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f"


def hook(dirs: dict[str, Path], payload: dict[str, Any]) -> Result:
    return run(dirs, "hook", "claude-code", stdin=json.dumps(payload))


def event(name: str, t: ClaudeTranscript, **extra: Any) -> dict[str, Any]:
    return {"session_id": t.session, "transcript_path": str(t.path), "cwd": t.cwd,
            "hook_event_name": name, **extra}


def ids_of(dirs: dict[str, Path]) -> dict[str, int]:
    """Stored turn id by content (first occurrence)."""
    from stenographer.app import open_app
    from stenographer.settings import Settings

    app = open_app(Settings(data_dir=dirs["data"]))
    try:
        with app.store.read() as conn:
            rows = list(conn.execute("SELECT content, min(id) FROM exchanges GROUP BY content"))
    finally:
        app.close()
    return {str(c): int(i) for c, i in rows}


def context_of(result: Result) -> str:
    assert result.code == 0 and result.err == "", result.err
    reply = json.loads(result.out)
    assert reply["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    text: str = reply["hookSpecificOutput"]["additionalContext"]
    return text


def section(text: str, title: str) -> str:
    """The lines of one ``## title (...)`` section."""
    found = re.search(rf"^##+ {re.escape(title)} \(.*?\)\n((?:(?!#).*\n?)*)", text, re.M)
    return found.group(1) if found else ""


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A 230-turn session captured by Stop hooks, then a PreCompact with five more."""
    root = tmp_path_factory.mktemp("briefing")
    dirs = {"data": root / "data", "claude": root / "claude" / "projects",
            "codex": root / "codex" / "sessions"}
    t = ClaudeTranscript(dirs["claude"])
    t.append(t.user("Set up the sync command for the store."), t.assistant(OLD_DECISION))
    for i in range(110):
        t.append(t.user(f"Step {i}: read the parser of module m{i}."),
                 t.assistant(f"Module m{i} reads its input line by line."))
        if i == 40:
            t.append(t.assistant(FIXED_BLOCKER))
        if i == 60:
            t.append(t.assistant(FIX), t.assistant(SECRET_DECISION))
        if i == 50:
            assert hook(dirs, event("Stop", t, stop_hook_active=False)).code == 0
    assert hook(dirs, event("Stop", t, stop_hook_active=False)).code == 0
    captured = len(stored(dirs))
    t.append(*(t.user(text) if role == "user" else t.assistant(text)
               for role, text in LAST_FIVE))
    pre = hook(dirs, event("PreCompact", t, trigger="auto", custom_instructions=""))
    yield {"dirs": dirs, "transcript": t, "captured_before": captured, "pre": pre}


def test_precompact_stores_the_last_messages_and_the_briefing_brings_back_the_record(
        session: dict[str, Any]):
    dirs, t = session["dirs"], session["transcript"]
    pre = session["pre"]
    assert (pre.code, pre.out, pre.err) == (0, "", "")
    contents = [c for _, _, c in stored(dirs)]
    assert len(contents) == session["captured_before"] + 5
    assert contents[-5:] == [text for _, text in LAST_FIVE]

    text = context_of(hook(dirs, event("SessionStart", t, source="compact")))
    assert len(text) <= 6_000
    ids = ids_of(dirs)
    assert ids[OLD_DECISION] == 2 and ids[NEW_DECISION] > 200  # 200+ turns apart
    decisions = section(text, "Decisions")
    assert f"- #{ids[OLD_DECISION]} {OLD_DECISION}\n" in decisions
    assert f"- #{ids[NEW_DECISION]} {NEW_DECISION}" in decisions
    assert text.index("## Open blockers") < text.index("## Decisions")  # open ones first
    assert section(text, "Open blockers") == f"- #{ids[OPEN_BLOCKER]} {OPEN_BLOCKER}\n"
    assert (f"- #{ids[FIXED_BLOCKER]} fixed in #{ids[FIX]}: {FIXED_BLOCKER}"
            in section(text, "Blockers fixed later"))
    asked = section(text, "Last requests")
    assert asked.startswith(f"- #{ids[LAST_FIVE[3][1]]} (")  # the newest request first
    assert SECRET not in text and "[REDACTED:github_token]" in text  # stored redacted
    assert "after compaction" in text.splitlines()[0] and t.session in text.splitlines()[0]

    status = run(dirs, "status", "--json")
    hooks = status.json()["capture"]["hooks"]
    assert hooks["last_run"]["event"] == "SessionStart" and hooks["last_run"]["ok"]
    assert hooks["last_error"] is None


def test_resume_gives_the_same_record_and_a_small_budget_keeps_whole_items(
        session: dict[str, Any]):
    dirs, t = session["dirs"], session["transcript"]
    text = context_of(hook(dirs, event("SessionStart", t, source="resume")))
    assert "(resumed)" in text.splitlines()[0]
    ids = ids_of(dirs)
    assert f"- #{ids[OLD_DECISION]} {OLD_DECISION}" in text
    assert f"- #{ids[OPEN_BLOCKER]} {OPEN_BLOCKER}" in text

    tight = context_of(run_with(dirs, {"STENO_BRIEFING_CHARS": "1000"},
                                event("SessionStart", t, source="compact")))
    assert len(tight) <= 1_000 and re.search(r"… \d+ more items? left out", tight)
    whole = {OLD_DECISION, NEW_DECISION, OPEN_BLOCKER, FIXED_BLOCKER,
             SECRET_DECISION.replace(SECRET, "[REDACTED:github_token]")}
    for line in tight.splitlines():
        if re.match(r"- #\d+ [A-Z]", line) and "fixed in" not in line:
            assert line.split(" ", 2)[2] in whole  # never half an item
    assert f"- #{ids[OPEN_BLOCKER]} {OPEN_BLOCKER}" in tight  # open blockers come first


def last_trace(dirs: dict[str, Path]) -> dict[str, Any]:
    """The stored stage trace of the newest run."""
    from stenographer.app import open_app
    from stenographer.settings import Settings

    app = open_app(Settings(data_dir=dirs["data"]))
    try:
        out, _ = app.run("trace", {"limit": 1})
        out, _ = app.run("trace", {"run_id": out["reply"]["runs"][0]["run_id"]})
    finally:
        app.close()
    trace: dict[str, Any] = out["reply"]["trace"]
    return trace


LOADED = ("import sys; from stenographer.capture_cli import hook_main; "
          "hook_main(sys.argv[1:]); "
          "print('nodes.batch' in sys.modules, 'numpy' in sys.modules, file=sys.stderr)")


def test_every_event_runs_the_hook_graph_and_a_briefing_imports_only_its_route(
        session: dict[str, Any]):
    """One graph whatever the event: its first stage routes SessionStart to the briefing's
    stages and Stop to the capture pass's; a briefing process never imports what the
    capture route needs (the batch path's modules), and neither imports numpy (a capture
    of a few turns computes their vectors without it, nodes.extract.vectors)."""
    dirs, t = session["dirs"], session["transcript"]
    for name, extra, route, other in (("SessionStart", {"source": "compact"}, "briefing_",
                                       "capture_"),
                                      ("Stop", {"stop_hook_active": False}, "capture_",
                                       "briefing_")):
        proc = subprocess.run([sys.executable, "-c", LOADED, "claude-code",
                               json.dumps(event(name, t, **extra))], cwd=REPO_ROOT,
                              env=env(dirs), capture_output=True, text=True, encoding="utf-8",
                              timeout=TIMEOUT, check=False)
        assert proc.returncode == 0 and ("additionalContext" in proc.stdout) is (
            name == "SessionStart"), proc.stderr
        # the capture route's modules loaded? numpy?
        assert proc.stderr.strip() == f"{name == 'Stop'} False", proc.stderr
        trace = last_trace(dirs)
        stages = [s["node"] for s in trace["stages"]]
        assert trace["graph"] == "hook" and stages[0] == "event", stages
        assert stages[1].startswith(route) and not any(s.startswith(other) for s in stages)


def run_with(dirs: dict[str, Path], extra: dict[str, str], payload: dict[str, Any]) -> Result:
    """The hook with settings of its own in its environment."""
    proc = subprocess.run([sys.executable, "-m", "stenographer", "hook", "claude-code"],
                          cwd=REPO_ROOT, env={**env(dirs), **extra}, input=json.dumps(payload),
                          capture_output=True, text=True, encoding="utf-8", timeout=TIMEOUT,
                          check=False)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def test_startup_briefs_from_the_previous_sessions_of_the_same_directory(
        session: dict[str, Any]):
    dirs, t = session["dirs"], session["transcript"]
    elsewhere = ClaudeTranscript(dirs["claude"], session="0d7c1a52-9f3e-4c1b-8a6d-2e5f4b3c2a10",
                                 project="-home-me-other", cwd="/home/me/other")
    elsewhere.append(elsewhere.user("Pick a name for the other project."),
                     elsewhere.assistant("We chose the name Kestrel for the other project."))
    assert hook(dirs, event("Stop", elsewhere)).code == 0
    new = ClaudeTranscript(dirs["claude"], session=NEW_SESSION)
    text = context_of(hook(dirs, event("SessionStart", new, source="startup")))
    assert len(text) <= 3_000  # startup: half the budget
    ids = ids_of(dirs)
    assert text.splitlines()[0] == f"# Stenographer briefing: previous sessions in {PROJECT}"
    assert f"## Session claude-code:{t.session} (" in text
    assert f"- #{ids[OPEN_BLOCKER]} {OPEN_BLOCKER}" in text
    assert f"- #{ids[NEW_DECISION]} {NEW_DECISION}" in text
    assert "Kestrel" not in text and elsewhere.session not in text  # another directory

    other = context_of(hook(dirs, event("SessionStart", ClaudeTranscript(
        dirs["claude"], session=NEW_SESSION, project="-home-me-other", cwd="/home/me/other"),
        source="startup")))
    assert "Kestrel" in other and t.session not in other


def test_nothing_for_a_session_the_store_never_saw_or_a_cleared_one(session: dict[str, Any]):
    dirs, t = session["dirs"], session["transcript"]
    unknown = ClaudeTranscript(dirs["claude"], session=NEW_SESSION)
    for payload in (event("SessionStart", unknown, source="compact"),
                    event("SessionStart", t, source="clear")):
        result = hook(dirs, payload)
        assert (result.code, result.out, result.err) == (0, "", "")
    lonely = ClaudeTranscript(dirs["claude"], session=NEW_SESSION, cwd="/home/me/empty")
    result = hook(dirs, event("SessionStart", lonely, source="startup"))
    assert (result.code, result.out) == (0, "")


def test_failures_exit_0_print_nothing_and_show_in_status(tmp_path: Path):
    dirs = {"data": tmp_path / "data", "claude": tmp_path / "claude" / "projects",
            "codex": tmp_path / "codex" / "sessions"}
    t = ClaudeTranscript(dirs["claude"])
    t.append(t.user("We decided to keep the queue on Redis streams for now."))
    assert hook(dirs, event("Stop", t)).code == 0

    def last_error() -> str:  # what `stenographer status` shows (checked once below)
        log = hook_log(dirs["data"])
        assert log is not None and log["last_error"] is not None
        return str(log["last_error"]["error"])

    bad = run(dirs, "hook", "claude-code", stdin="{not json")
    assert (bad.code, bad.out) == (0, "") and "not JSON" in bad.err
    assert "not JSON" in last_error()

    misconfigured = run_with(dirs, {"STENO_BRIEFING_CHARS": "lots"},
                             event("SessionStart", t, source="compact"))
    assert (misconfigured.code, misconfigured.out) == (0, "")
    assert "STENO_BRIEFING_CHARS" in misconfigured.err

    missing = hook(dirs, {**event("PreCompact", t), "transcript_path": str(tmp_path / "no.jsonl")})
    assert (missing.code, missing.out) == (0, "")
    assert "cannot be read" in last_error()

    t.append(t.user("One more message while another process holds the store."))
    holder = apsw.Connection(str(dirs["data"] / "steno.db"))
    try:
        holder.execute("BEGIN IMMEDIATE")  # a writer that does not let go
        started = time.monotonic()
        locked = hook(dirs, event("PreCompact", t, trigger="manual"))
        assert (locked.code, locked.out) == (0, "")
        assert time.monotonic() - started < 60  # gives up after the busy timeout (2 s)
        holder.execute("ROLLBACK")
        holder.execute("PRAGMA locking_mode=EXCLUSIVE")  # no reader gets in either
        holder.execute("BEGIN EXCLUSIVE")
        holder.execute("COMMIT")
        unreadable = hook(dirs, event("SessionStart", t, source="compact"))
        assert (unreadable.code, unreadable.out) == (0, "")
        assert "locked" in unreadable.err
    finally:
        holder.close()
    assert "locked" in last_error()
    status = run(dirs, "status", "--json").json()["capture"]["hooks"]
    assert status["last_error"]["event"] == "SessionStart"
    assert "locked" in status["last_error"]["error"]
    retried = hook(dirs, event("PreCompact", t, trigger="manual"))  # the lock is gone
    assert (retried.code, retried.out) == (0, "")
    assert [c for _, _, c in stored(dirs)][-1] == "One more message while another process " \
                                                   "holds the store."


def test_config_prints_the_hooks_block_whose_command_runs(tmp_path: Path):
    dirs = {"data": tmp_path / "data", "claude": tmp_path / "claude" / "projects",
            "codex": tmp_path / "codex" / "sessions"}
    printed = run(dirs, "config", "claude-code", "--hooks", "--dir", str(dirs["data"]))
    assert printed.code == 0 and "settings.json" in printed.err
    hooks = printed.json()["hooks"]
    assert sorted(hooks) == ["PreCompact", "SessionStart", "Stop"]
    assert [g.get("matcher") for g in hooks["SessionStart"]] == ["compact|resume", "startup"]
    commands = {h["command"] for groups in hooks.values() for g in groups for h in g["hooks"]}
    assert len(commands) == 1
    command = commands.pop()
    assert command.startswith(f"OMEGA_STENOGRAPHER_DIR={dirs['data']} /")
    assert command.endswith(" hook claude-code")
    t = ClaudeTranscript(dirs["claude"])
    t.append(t.user("We decided to run the hook exactly as the host would."))
    for payload in (event("Stop", t), event("SessionStart", t, source="resume")):
        ran = subprocess.run(command, shell=True, input=json.dumps(payload), cwd=tmp_path,
                             env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT)},
                             capture_output=True, text=True, timeout=TIMEOUT, check=False)
        assert ran.returncode == 0, ran.stderr
    assert "#1 We decided to run the hook" in context_of(Result(0, ran.stdout, ran.stderr))
    assert run(dirs, "config", "vscode", "--hooks").code == 2


def test_codex_hooks_capture_and_brief_with_the_same_contract(tmp_path: Path):
    """Codex's hooks.json hooks: JSON on stdin with hook_event_name, session_id, cwd and
    a transcript_path that may be null (the rollout file is found by the session id)."""
    dirs = {"data": tmp_path / "data", "claude": tmp_path / "claude" / "projects",
            "codex": tmp_path / "codex" / "sessions"}
    codex = CodexTranscript(dirs["codex"])
    codex.append(codex.meta(), codex.user("Which queue do we use for the uploads?"),
                 codex.assistant("We went with Redis streams for the upload queue."),
                 codex.assistant("The upload worker crashed again with a KeyError."))
    base = {"session_id": codex.session, "transcript_path": None, "cwd": PROJECT,
            "model": "gpt-5-codex", "permission_mode": "default"}
    pre = run(dirs, "hook", "codex", stdin=json.dumps(
        {**base, "hook_event_name": "PreCompact", "trigger": "auto"}))
    assert (pre.code, pre.out, pre.err) == (0, "", "")
    assert [c for _, _, c in stored(dirs)][-1] == "The upload worker crashed again with a KeyError."
    text = context_of(run(dirs, "hook", "codex", stdin=json.dumps(
        {**base, "hook_event_name": "SessionStart", "source": "resume"})))
    assert text.splitlines()[0] == (f"# Stenographer briefing: session codex:{codex.session} "
                                    "(resumed)")
    assert "- #2 We went with Redis streams for the upload queue." in text
    assert "## Open blockers (1, newest first)\n- #3 The upload worker crashed" in text


def test_a_secret_stored_as_sent_is_still_not_printed(tmp_path: Path):
    """With STENO_REDACT_SECRETS=off the store keeps turns as sent; the briefing's lines
    pass the secret detector anyway before they reach an agent's context."""
    dirs = {"data": tmp_path / "data", "claude": tmp_path / "claude" / "projects",
            "codex": tmp_path / "codex" / "sessions"}
    t = ClaudeTranscript(dirs["claude"])
    t.append(t.user("Set up the release job."), t.assistant(SECRET_DECISION))
    raw = {"STENO_REDACT_SECRETS": "off"}
    assert run_with(dirs, raw, event("Stop", t)).code == 0
    assert [c for _, _, c in stored(dirs)][-1] == SECRET_DECISION  # stored as sent
    text = context_of(run_with(dirs, raw, event("SessionStart", t, source="compact")))
    assert SECRET not in text
    assert "- #2 Decision: the release job pushes with the token [REDACTED:github_token]" in text
