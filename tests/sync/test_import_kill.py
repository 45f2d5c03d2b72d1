"""An import killed mid-way (SIGKILL of a real ``stenographer import`` process) keeps
whole batches only — each batch of records is one transaction — and importing the
bundle again stores the rest, nothing twice: the store ends as a clean import leaves it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import apsw

from nodes.publish.bundle_apply import BATCH
from tests.sync.support import chains, heads, identities, opened

REPO = Path(__file__).resolve().parents[2]
SESSIONS, TURNS = 4, 1_500  # per session: 12 batches of records in all


def _stored(db: Path) -> list[str]:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        conn.set_busy_timeout(10_000)
        return [str(r[0]) for r in conn.execute("SELECT content FROM exchanges")]
    finally:
        conn.close()


def test_an_import_killed_mid_way_keeps_whole_batches_and_completes_once(tmp_path: Path):
    source, target = tmp_path / "a", tmp_path / "b"
    bundle = tmp_path / "a.zst"
    with opened(source) as app:
        for s in range(SESSIONS):
            turns = [{"session_id": f"s{s}", "role": ("user", "assistant")[n % 2],
                      "content": f"session {s} turn {n}: the deploy cache note "
                                 f"{n * 7919 % 1000}; we decided to keep it",
                      "created_at": f"2026-11-01T{n // 3600:02d}:{n // 60 % 60:02d}:"
                                    f"{n % 60:02d}Z"}
                     for n in range(TURNS)]
            out, _ = app.run("ingest_batch", {"turns": turns})
            assert out["reply"]["stored"] == TURNS
        app.run("sync_export", {"path": str(bundle)})
    total = SESSIONS * TURNS
    env = {**os.environ, "OMEGA_STENOGRAPHER_DIR": str(target), "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "stenographer", "import", str(bundle)]
    proc = subprocess.Popen(command, env=env, cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    db = target / "steno.db"
    deadline = time.monotonic() + 300
    try:
        while True:  # kill once a batch is in and the next ones are in flight
            assert proc.poll() is None, "the import ended before it could be killed"
            assert time.monotonic() < deadline
            try:
                stored = len(_stored(db)) if db.exists() else 0
            except apsw.Error:
                stored = 0
            if stored:
                break
            time.sleep(0.005)
        time.sleep(0.05)  # into the next batch
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    contents = _stored(db)
    assert 0 < len(contents) < total
    assert len(contents) % BATCH == 0  # whole batches: every record is a turn
    assert len(set(contents)) == len(contents)
    done = subprocess.run([*command, "--json"], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    contents = _stored(db)
    assert len(contents) == total and len(set(contents)) == total
    # what the sender holds, in its order, chained as there
    assert identities(target) == identities(source)
    assert chains(target) == chains(source)
    assert heads(target) == heads(source)
    with opened(target) as app:
        out, _ = app.run("contract_audit", {})
        assert [c["name"] for c in out["report"]["contracts"] if not c["passed"]] == []
