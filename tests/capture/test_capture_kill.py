"""A capture pass killed mid-batch (SIGKILL of a real ``stenographer capture --once``
process) loses nothing it acknowledged — every record before a file's committed cursor
is stored — and the next pass stores the rest, nothing twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import apsw

from tests.capture.transcripts import ClaudeTranscript

REPO = Path(__file__).resolve().parents[2]
FILES, TURNS = 3, 1_500  # per file: several batches of 200 records each


def _store_state(db: Path) -> tuple[int, dict[str, int], list[str]]:
    """(turns stored, committed cursor position per file, stored contents)."""
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        conn.set_busy_timeout(10_000)
        contents = [str(r[0]) for r in conn.execute("SELECT content FROM exchanges")]
        cursors = {str(n): int(p) for n, p in conn.execute("SELECT name, position FROM cursors")}
    finally:
        conn.close()
    return len(contents), cursors, contents


def test_a_pass_killed_mid_batch_loses_nothing_acknowledged_and_stores_nothing_twice(
        tmp_path: Path):
    claude_dir, data = tmp_path / "claude", tmp_path / "data"
    transcripts = []
    for f in range(FILES):
        t = ClaudeTranscript(claude_dir, session=f"00000000-0000-4000-8000-{f:012d}")
        t.append(*(t.user(f"file {f} turn {n}: the deploy cache note {n * 7919 % 1000}")
                   for n in range(TURNS)))
        transcripts.append(t)
    env = {**os.environ, "OMEGA_STENOGRAPHER_DIR": str(data), "PYTHONPATH": str(REPO),
           "STENO_CAPTURE_CLAUDE_DIR": str(claude_dir),
           "STENO_CAPTURE_CODEX_DIR": str(tmp_path / "codex")}
    command = [sys.executable, "-m", "stenographer", "capture", "--once", "--only",
               "claude-code"]
    proc = subprocess.Popen(command, env=env, cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    db = data / "steno.db"
    deadline = time.monotonic() + 300
    try:
        while True:  # kill once a cursor moved and turns of the next batch are in flight
            assert proc.poll() is None, "the pass ended before it could be killed"
            assert time.monotonic() < deadline
            if db.exists():
                try:
                    stored, cursors, _ = _store_state(db)
                except apsw.Error:
                    stored, cursors = 0, {}
                if any(cursors.values()) and stored < FILES * TURNS // 2:
                    break
            time.sleep(0.01)
        time.sleep(0.05)  # into the batch after the acknowledged one
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    stored, cursors, contents = _store_state(db)
    assert 0 < stored < FILES * TURNS
    assert len(set(contents)) == len(contents)
    for t in transcripts:
        position = cursors.get(str(t.path), 0)
        acknowledged = [text for (_, text), end in zip(t.said, _ends(t.path), strict=True)
                        if end <= position]
        assert set(acknowledged) <= set(contents)
    done = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    stored, _, contents = _store_state(db)
    assert stored == FILES * TURNS and len(set(contents)) == stored
    assert set(contents) == {text for t in transcripts for _, text in t.said}


def _ends(path: Path) -> list[int]:
    """The byte offset after each line of a transcript."""
    ends, at = [], 0
    for line in path.read_bytes().splitlines(keepends=True):
        at += len(line)
        ends.append(at)
    return ends
