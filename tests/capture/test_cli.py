"""`stenographer capture` and `stenographer hook` as real subprocesses on a real store.

One watcher per store: a second watcher (or a one-off pass) is refused while the first
runs, a hook leaves the work to it, and a killed watcher leaves no stale lock behind.
Waits are bounded: the watcher's own output lines are read with a timeout.
"""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from stenographer.app import open_app
from stenographer.settings import Settings
from tests.capture.transcripts import ClaudeTranscript, CodexTranscript
from tests.cli.conftest import REPO_ROOT, TIMEOUT, Result, cli_env

WAIT = 60.0  # seconds, generous for a loaded machine; never infinite


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    return {"data": tmp_path / "data", "claude": tmp_path / "claude" / "projects",
            "codex": tmp_path / "codex" / "sessions"}


def env(dirs: dict[str, Path]) -> dict[str, str]:
    return cli_env(dirs["data"], STENO_CAPTURE_CLAUDE_DIR=str(dirs["claude"]),
                   STENO_CAPTURE_CODEX_DIR=str(dirs["codex"]))


def run(dirs: dict[str, Path], *args: str, stdin: str | None = None) -> Result:
    proc = subprocess.run([sys.executable, "-m", "stenographer", *args], cwd=REPO_ROOT,
                          env=env(dirs), input=stdin, capture_output=True, text=True,
                          encoding="utf-8", timeout=TIMEOUT, check=False)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def stored(dirs: dict[str, Path]) -> list[tuple[str, str, str]]:
    app = open_app(Settings(data_dir=dirs["data"]))
    try:
        with app.store.read() as conn:
            return [tuple(r) for r in conn.execute(  # type: ignore[misc]
                "SELECT s.name, e.role, e.content FROM exchanges e "
                "JOIN sessions s ON s.id = e.session_id ORDER BY e.id")]
    finally:
        app.close()


class Watcher:
    """`stenographer capture --watch` in a subprocess; its output read line by line."""

    def __init__(self, dirs: dict[str, Path], *extra: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "stenographer", "capture", "--watch", "--interval", "0.1",
             "--json", *extra], cwd=REPO_ROOT, env=env(dirs), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, encoding="utf-8")
        self.out: queue.Queue[str] = queue.Queue()
        self.err: queue.Queue[str] = queue.Queue()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.pumps = [threading.Thread(target=self._pump, args=(stream, q), daemon=True)
                      for stream, q in ((self.proc.stdout, self.out),
                                        (self.proc.stderr, self.err))]
        for pump in self.pumps:
            pump.start()

    @staticmethod
    def _pump(stream: IO[str], q: queue.Queue[str]) -> None:
        for line in stream:
            q.put(line)

    @staticmethod
    def expect(q: queue.Queue[str], ok: Callable[[str], bool]) -> str:
        deadline = time.monotonic() + WAIT
        while True:
            line = q.get(timeout=max(deadline - time.monotonic(), 0.001))
            if ok(line):
                return line

    def passes_until(self, ok: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        return json.loads(self.expect(self.out, lambda line: ok(json.loads(line))))

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=WAIT)

    def close(self) -> None:
        """Stop it if still running; its pipes end with it."""
        self.stop(signal.SIGKILL)
        for pump in self.pumps:
            pump.join(timeout=WAIT)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def watcher(dirs: dict[str, Path]) -> Iterator[Callable[..., Watcher]]:
    started: list[Watcher] = []

    def start(*extra: str) -> Watcher:
        w = Watcher(dirs, *extra)
        started.append(w)
        w.expect(w.err, lambda line: "watching" in line)  # it holds the lock now
        return w

    yield start
    for w in started:
        w.close()


def test_capture_once_exit_codes_and_json(dirs: dict[str, Path]):
    nothing = run(dirs, "capture", "--once", "--json")
    assert nothing.code == 1, nothing.err
    assert nothing.json()["files"] == 0

    claude, codex = ClaudeTranscript(dirs["claude"]), CodexTranscript(dirs["codex"])
    claude.append(claude.user("q"), "not json at all\n", claude.assistant("a"))
    codex.append(codex.meta(), codex.user("cq"), codex.assistant("ca"))
    first = run(dirs, "capture", "--once", "--json")
    assert first.code == 0, first.err
    report = first.json()
    assert {k: report[k] for k in ("files", "captured", "duplicates", "skipped", "errors")} \
        == {"files": 2, "captured": 4, "duplicates": 0, "skipped": 1, "errors": 0}
    text = run(dirs, "capture", "--once", "--only", "claude-code")
    assert text.code == 0 and text.out.startswith("capture: 1 file, 0 turns captured")

    status = run(dirs, "status", "--json").json()["capture"]
    assert (status["files"], status["captured"], status["skipped"]) == (2, 4, 1)
    assert "not JSON" in status["last_error"]["error"] and status["watcher"] is None
    line = run(dirs, "status").out
    assert "capture: no watcher running; 2 files, 4 turns captured" in line


def test_one_watcher_per_store_and_appends_become_searchable(
        dirs: dict[str, Path], watcher: Callable[..., Watcher]):
    claude = ClaudeTranscript(dirs["claude"])
    claude.append(claude.user("Which queue did we choose?"))
    first = watcher()
    first.passes_until(lambda p: p["captured"] == 1)

    second = run(dirs, "capture", "--watch", "--json")
    assert second.code == 2
    assert f"pid {first.proc.pid}" in second.err and "one watcher per store" in second.err
    assert second.json()["error"]["code"] == "steno.capture_locked"
    once = run(dirs, "capture", "--once")
    assert once.code == 2 and "already holds" in once.err

    status = run(dirs, "status", "--json").json()["capture"]
    assert status["watcher"]["pid"] == first.proc.pid and status["watcher"]["mode"] == "watch"
    assert f"watch pid {first.proc.pid}" in run(dirs, "status").out

    # A host hook defers to the watcher: exit 0, no output (stdout may reach the model).
    hook = run(dirs, "hook", "claude-code",
               stdin=json.dumps({"transcript_path": str(claude.path)}))
    assert (hook.code, hook.out, hook.err) == (0, "", "")

    claude.append(claude.assistant("Decision: we went with Redis streams for the queue."))
    first.passes_until(lambda p: p["captured"] == 1)
    app = open_app(Settings(data_dir=dirs["data"]))
    try:
        out, _ = app.run("search", {"query": "redis streams", "cross_session": True})
        assert out["hits"][0]["snippet"].startswith("Decision: we went with Redis")
    finally:
        app.close()

    codex = CodexTranscript(dirs["codex"])  # a session that starts while it watches
    codex.append(codex.meta(), codex.user("new codex session"), codex.assistant("seen"))
    first.passes_until(lambda p: p["captured"] == 2)

    assert first.stop() == 0  # SIGTERM: a clean stop
    assert run(dirs, "status", "--json").json()["capture"]["watcher"] is None
    assert [c for _, _, c in stored(dirs)] == [c for _, c in claude.said + codex.said]


def test_a_killed_watcher_leaves_no_stale_lock(dirs: dict[str, Path],
                                               watcher: Callable[..., Watcher]):
    codex = CodexTranscript(dirs["codex"])
    codex.append(codex.meta(), codex.user("before the kill"))
    w = watcher()
    w.passes_until(lambda p: p["captured"] == 1)
    assert w.stop(signal.SIGKILL) == -signal.SIGKILL
    codex.append(codex.assistant("after the kill"))
    again = run(dirs, "capture", "--once", "--json")
    assert again.code == 0, again.err
    assert again.json()["captured"] == 1
    assert [c for _, _, c in stored(dirs)] == ["before the kill", "after the kill"]


def test_hooks_capture_the_transcript_the_host_names(dirs: dict[str, Path]):
    claude = ClaudeTranscript(dirs["claude"])
    claude.append(claude.user("hello from claude"), claude.assistant("hi"))
    other = ClaudeTranscript(dirs["claude"], session="0d7c1a52-9f3e-4c1b-8a6d-2e5f4b3c2a10")
    other.append(other.user("another session, not named by this hook"))
    payload = {"session_id": claude.session, "transcript_path": str(claude.path),
               "cwd": "/home/me/work/app", "hook_event_name": "Stop",
               "stop_hook_active": False}
    hook = run(dirs, "hook", "claude-code", stdin=json.dumps(payload))
    assert (hook.code, hook.out, hook.err) == (0, "", "")
    assert [c for _, _, c in stored(dirs)] == ["hello from claude", "hi"]
    assert run(dirs, "hook", stdin=json.dumps(payload)).code == 0  # claude-code by default
    assert len(stored(dirs)) == 2

    codex = CodexTranscript(dirs["codex"])
    codex.append(codex.meta(), codex.user("hello from codex"), codex.assistant("hey"))
    notify = {"type": "agent-turn-complete", "thread-id": codex.session, "turn-id": "1",
              "cwd": "/home/me", "input-messages": ["hello from codex"],
              "last-assistant-message": "hey"}
    hook = run(dirs, "hook", "codex", json.dumps(notify))  # Codex: the last argument
    assert (hook.code, hook.out) == (0, ""), hook.err
    assert [c for _, _, c in stored(dirs)][2:] == ["hello from codex", "hey"]

    bad = run(dirs, "hook", "claude-code", stdin="{not json")
    assert bad.code == 0 and bad.out == "" and "not JSON" in bad.err  # never fails the host
    verbose = run(dirs, "hook", "claude-code", "--verbose", stdin=json.dumps(payload))
    assert verbose.code == 0 and verbose.out == ""
    assert "capture: 1 file, 0 turns captured" in verbose.err
