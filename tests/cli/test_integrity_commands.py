"""`stenographer audit` and `stenographer forget` as subprocesses on real stores: exit
codes 0 clean / 1 violations or nothing to forget / 2 could not run, `--json`, the
secret read from standard input and never echoed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import apsw

from tests.cli.conftest import REPO_ROOT, TIMEOUT, cli_env, run_cli, seed

SECRET = "Quartermain-Zebulon-7731"  # not a credential shape: redaction would have caught one


def test_audit_exit_codes_and_json(tmp_path: Path):
    data = tmp_path / "data"
    ids = seed(data)["alpha_ids"]
    clean = run_cli(data, "audit")
    assert clean.code == 0, clean.err
    assert clean.out.startswith("Audit of the whole store: all 11 contracts hold")

    raw = apsw.Connection(str(data / "steno.db"))
    raw.execute("DELETE FROM exchanges_fts WHERE rowid = ?", (ids[0],))
    raw.close()
    broken = run_cli(data, "audit", "--json")
    assert broken.code == 1, broken.err
    report = broken.json()
    assert report["passed"] is False and report["run_id"]
    assert {c["name"]: c["ids"] for c in report["contracts"] if not c["passed"]} == {
        "keyword_index": [ids[0]]}

    unknown = run_cli(data, "audit", "--session", "nope")
    assert unknown.code == 2 and "not in the store" in unknown.err
    unusable = tmp_path / "junk"
    unusable.mkdir()
    (unusable / "steno.db").write_bytes(b"this is not a database" * 100)
    assert run_cli(unusable, "audit").code == 2


def test_forget_from_stdin_with_confirmation(tmp_path: Path):
    data = tmp_path / "data"
    seed(data)
    from stenographer.app import open_app
    from stenographer.settings import Settings

    app = open_app(Settings(data_dir=data))
    try:
        app.run("ingest", {"role": "user", "content": f"my token is {SECRET}",
                           "session_id": "leaky"})
    finally:
        app.close()

    def forget(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "stenographer", "forget", *args],
                              input=SECRET + "\n", cwd=REPO_ROOT, env=cli_env(data),
                              capture_output=True, text=True, timeout=TIMEOUT, check=False)

    unconfirmed = forget("--text-stdin")
    assert unconfirmed.returncode == 2 and "confirm" in unconfirmed.stderr
    done = forget("--text-stdin", "--yes", "--reason", "token leak", "--json")
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout + done.stderr
    assert '"count": 1' in done.stdout
    assert SECRET.encode() not in (data / "steno.db").read_bytes()
    assert forget("--text-stdin", "--yes").returncode == 1  # nothing left to forget
    assert run_cli(data, "audit").code == 0
    assert run_cli(data, "forget", "--yes").code == 2  # no filter
