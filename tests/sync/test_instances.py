"""Push and pull between two real server processes on 127.0.0.1, driven by the real
`stenographer sync` command in subprocesses: both stores end with the same turns and
hashes and pass the audit; a sender SIGKILLed mid-push finishes on restart with no
duplicate and no gap; refusals and unreachable peers are reported in status."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.support import REPO_ROOT, server_env
from tests.e2e.test_http import TOKEN, HttpServer, free_port, running
from tests.sync.support import audit_passes, identities, ingest, opened, readonly

RUN_TIMEOUT = 180.0  # one sync command on a loaded machine; never infinite
WAIT_TIMEOUT = 60.0


def words(n: int, topic: str) -> list[str]:
    return [f"{topic} turn {i}: we went with option {i % 7} after the review."
            for i in range(n)]


def steno(data_dir: Path, *args: str, token: str | None = TOKEN, **env: str
          ) -> subprocess.CompletedProcess[str]:
    extra = {"STENO_SYNC_TOKEN": token} if token else {}
    return subprocess.run(
        [sys.executable, "-m", "stenographer", *args], cwd=str(REPO_ROOT),
        env={**os.environ, **server_env(data_dir, **extra, **env)},
        capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False)


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[HttpServer, HttpServer]]:
    with running(tmp_path / "a", STENO_HTTP_TOKEN=TOKEN) as a, \
            running(tmp_path / "b", STENO_HTTP_TOKEN=TOKEN) as b:
        yield a, b


def delivery(data_dir: Path) -> dict[str, Any]:
    done = steno(data_dir, "sync", "status", "--json")
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_push_then_pull_the_other_way_gives_both_stores_the_same_turns(
        pair: tuple[HttpServer, HttpServer]):
    a, b = pair
    # Both instances are serving while turns are written to their stores.
    with opened(a.data_dir) as app:
        ingest(app, "shared", words(13, "shared"))
        ingest(app, "only-a", words(5, "a"))
    with opened(b.data_dir) as app:
        ingest(app, "shared", words(4, "b-side"), start=100)
        ingest(app, "only-b", words(6, "b"))
    pushed = steno(a.data_dir, "sync", "push", "--to", b.base, "--batch", "7", "--json")
    assert pushed.returncode == 0, pushed.stderr
    outcome = json.loads(pushed.stdout)
    assert (outcome["ok"], outcome["applied"], outcome["batches"]) == (True, 18, 3)
    pulled = steno(a.data_dir, "sync", "pull", "--from", b.base, "--json")
    assert pulled.returncode == 0, pulled.stderr
    outcome = json.loads(pulled.stdout)
    assert (outcome["ok"], outcome["applied"], outcome["duplicates"]) == (True, 10, 18)

    got_a, got_b = identities(a.data_dir), identities(b.data_dir)
    assert sorted(got_a) == sorted(got_b) and len(got_a) == len(set(got_a)) == 28
    for data_dir in (a.data_dir, b.data_dir):
        audited = steno(data_dir, "audit")
        assert audited.returncode == 0, audited.stdout + audited.stderr

    status = delivery(a.data_dir)
    (out,) = [p for p in status["peers"] if p["direction"] == "outbox"]
    (inn,) = [p for p in status["peers"] if p["direction"] == "inbox"]
    assert (out["peer"], out["delivered"], out["pending"]) == (b.base, 18, 10)
    assert (inn["received"], inn["duplicates"]) == (10, 18) and out["last_error"] is None
    # Nothing new: a second round sends nothing and stores nothing.
    again = steno(a.data_dir, "sync", "push", "--to", b.base, "--json")
    assert json.loads(again.stdout)["applied"] == 0
    assert sorted(identities(b.data_dir)) == sorted(got_b)


def test_a_sender_killed_mid_push_finishes_on_restart_without_duplicates_or_gaps(
        pair: tuple[HttpServer, HttpServer], tmp_path: Path):
    a, b = pair
    with opened(a.data_dir) as app:
        for s in range(4):
            ingest(app, f"s{s}", words(150, f"s{s}"))
    expected = identities(a.data_dir)
    env = {**os.environ, **server_env(a.data_dir, STENO_SYNC_TOKEN=TOKEN)}
    sender = subprocess.Popen(
        [sys.executable, "-m", "stenographer", "sync", "push", "--to", b.base, "--batch", "10"],
        cwd=str(REPO_ROOT), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + WAIT_TIMEOUT
        while outbox_position(a.data_dir) < 100:  # a few batches acknowledged
            assert sender.poll() is None, "the push finished before it could be killed"
            assert time.monotonic() < deadline, "no batch acknowledged in time"
            time.sleep(0.01)
        sender.send_signal(signal.SIGKILL)
        sender.wait(timeout=10)
    finally:
        if sender.poll() is None:
            sender.kill()
            sender.wait(timeout=10)
        assert sender.stderr is not None
        sender.stderr.close()
    partial = identities(b.data_dir)
    assert 0 < len(partial) < len(expected), "killed mid-push"
    # No gap so far: what arrived is a prefix of the outbox, in order.
    assert partial == expected[: len(partial)]
    resumed = steno(a.data_dir, "sync", "push", "--to", b.base, "--batch", "10", "--json")
    assert resumed.returncode == 0, resumed.stderr
    got = identities(b.data_dir)
    assert got == expected and len(set(got)) == len(got) == 600
    assert outbox_position(a.data_dir) == max_id(a.data_dir)
    with opened(b.data_dir) as app:
        assert audit_passes(app)


def outbox_position(data_dir: Path) -> int:
    conn = readonly(data_dir)
    try:
        row = conn.execute("SELECT position FROM cursors WHERE kind = 'outbox:sync'").fetchone()
        return int(row[0]) if row else 0
    finally:
        conn.close()


def max_id(data_dir: Path) -> int:
    conn = readonly(data_dir)
    try:
        return int(conn.execute("SELECT max(id) FROM exchanges").fetchone()[0])
    finally:
        conn.close()


def test_a_wrong_token_is_refused_without_retrying_and_shows_in_status(
        pair: tuple[HttpServer, HttpServer]):
    a, b = pair
    with opened(a.data_dir) as app:
        ingest(app, "x", ["one turn"])
    refused = steno(a.data_dir, "sync", "push", "--to", b.base, "--json",
                    token="not-the-token-0123456789")
    assert refused.returncode == 2
    outcome = json.loads(refused.stdout)
    assert outcome["retries"] == 0 and "refused the token" in outcome["error"]
    assert identities(b.data_dir) == []
    status = delivery(a.data_dir)
    assert "refused the token" in status["last_error"]["error"]
    assert status["pending"] == 1 and status["delivered"] == 0
    # The MCP status tool's text says it too.
    with opened(a.data_dir) as app:
        out, _ = app.run("status", {})
    text = out["reply"]["text"]
    assert "refused the token" in text and "1 pending" in text


def test_an_unreachable_peer_is_retried_with_backoff_then_reported(tmp_path: Path):
    data = tmp_path / "a"
    with opened(data) as app:
        ingest(app, "x", ["one turn"])
    nobody = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    failed = steno(data, "sync", "push", "--to", nobody, "--json", STENO_SYNC_RETRIES="2")
    assert failed.returncode == 2
    outcome = json.loads(failed.stdout)
    assert outcome["retries"] == 2 and "could not be reached" in outcome["error"]
    assert time.monotonic() - started >= 0.25 + 0.5  # two waits: 0.5 s and 1 s, jittered
    assert delivery(data)["last_error"]["peer"] == nobody


def test_the_pull_endpoint_and_push_endpoint_check_their_input(
        pair: tuple[HttpServer, HttpServer]):
    a, _ = pair
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=a.base, headers=auth, timeout=30) as client:
        assert client.get("/sync/pull", params={"after": "x"}).status_code == 400
        assert client.get("/sync/pull", params={"limit": "0"}).status_code == 400
        junk = client.post("/sync/push", content=b"not a bundle")
        assert junk.status_code == 400 and "not a readable zstd" in junk.json()["error"]
        empty = client.get("/sync/pull", params={"after": "0", "limit": "5"})
        assert empty.status_code == 200 and "X-Steno-Through" not in empty.headers
    assert httpx.get(a.url("/sync/pull")).status_code == 401
    assert httpx.post(a.url("/sync/push"), content=b"").status_code == 401


def test_a_server_with_a_peer_configured_pushes_in_the_background(tmp_path: Path):
    with running(tmp_path / "b", STENO_HTTP_TOKEN=TOKEN) as b:
        with opened(tmp_path / "a") as app:
            ingest(app, "bg", words(5, "bg"))
        with running(tmp_path / "a", STENO_SYNC_PEER=b.base, STENO_SYNC_TOKEN=TOKEN,
                     STENO_SYNC_INTERVAL="0.2"):
            with opened(tmp_path / "a") as app:
                ingest(app, "bg", words(3, "later"), start=5)
            deadline = time.monotonic() + WAIT_TIMEOUT
            while len(identities(b.data_dir)) < 8:
                assert time.monotonic() < deadline, "the background push did not deliver"
                time.sleep(0.05)
        assert sorted(identities(b.data_dir)) == sorted(identities(tmp_path / "a"))
