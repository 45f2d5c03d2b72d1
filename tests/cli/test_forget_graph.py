"""`stenographer forget` on a store with a GraphRAG graph, as subprocesses: a forgotten
literal that was extracted as an entity leaves the graph export and the file, the reply
says what forgetting did to the graph, `graphrag extract` then recomputes communities,
and the audit holds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from stenographer.app import open_app
from stenographer.settings import Settings
from tests.cli.conftest import REPO_ROOT, TIMEOUT, cli_env, run_cli, seed

SECRET = "Vorquintal"  # a name: extracted as an entity (key 'vorquintal')


def test_forgetting_an_entity_literal_through_the_cli(tmp_path: Path):
    data = tmp_path / "data"
    seed(data)
    app = open_app(Settings(data_dir=data))
    try:
        for text in (f"Alice: We decided to use {SECRET} for the deploy pipeline.",
                     f"Bob: {SECRET} replaces Redis in the plan."):
            app.run("ingest", {"role": "user", "content": text, "session_id": "leaky"})
    finally:
        app.close()
    assert run_cli(data, "graphrag", "extract").code == 0
    before = run_cli(data, "graphrag", "export", "--format", "json")
    assert "vorquintal" in before.out.lower()

    done = subprocess.run([sys.executable, "-m", "stenographer", "forget", "--text-stdin",
                           "--yes", "--json"], input=SECRET + "\n", cwd=REPO_ROOT,
                          env=cli_env(data), capture_output=True, text=True,
                          timeout=TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout + done.stderr
    reply = json.loads(done.stdout)
    assert reply["count"] == 2 and reply["graph"]["sessions_rederived"] == 1
    assert reply["graph"]["entities_removed"] >= 1 and "GraphRAG" in reply["text"]

    after = run_cli(data, "graphrag", "export", "--format", "json")
    assert "vorquintal" not in after.out.lower()
    stats = run_cli(data, "graphrag", "stats", "--json").json()
    assert stats["stale"] and stats["communities"] == 0
    extracted = run_cli(data, "graphrag", "extract", "--json").json()
    assert extracted["turns_read"] == 0 and extracted["detection"]["communities"] >= 1
    assert SECRET.lower().encode() not in (data / "steno.db").read_bytes().lower()
    assert run_cli(data, "audit").code == 0
