"""`stenographer export`, `import` and `sync`: output, --json and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import run_cli
from tests.sync.support import identities, ingest, opened


def test_export_and_import_commands(tmp_path: Path) -> None:
    a, b, bundle = tmp_path / "a", tmp_path / "b", tmp_path / "a.zst"
    with opened(a) as app:
        ingest(app, "cli", ["We decided to ship on Friday.", "The deploy is blocked."])
    done = run_cli(a, "export", str(bundle))
    assert done.code == 0, done.err
    assert done.out.startswith(f"Exported 2 turns and 0 tombstones of 1 session to {bundle}")
    again = run_cli(a, "export", str(bundle), "--json")
    assert again.code == 2 and "already exists" in json.loads(again.out)["error"]["message"]

    got = run_cli(b, "import", str(bundle), "--json")
    assert got.code == 0, got.err
    reply = json.loads(got.out)
    assert (reply["applied"], reply["duplicates"], reply["bundle_turns"]) == (2, 0, 2)
    assert identities(b) == identities(a)
    twice = run_cli(b, "import", str(bundle))
    assert twice.code == 0 and "0 new turns stored, 2 already here" in twice.out

    assert run_cli(tmp_path / "empty", "export", str(tmp_path / "e.zst")).code == 1


def test_a_refused_bundle_exits_2_and_says_why(tmp_path: Path) -> None:
    bundle = tmp_path / "junk.zst"
    bundle.write_bytes(b"\x28\xb5\x2f\xfd" + b"\x00" * 40)  # a zstd magic, then garbage
    done = run_cli(tmp_path / "b", "import", str(bundle), "--json")
    assert done.code == 2
    error = json.loads(done.out)["error"]
    assert error["code"] == "steno.bundle" and "Nothing was applied" in error["message"]
    missing = run_cli(tmp_path / "b", "import", str(tmp_path / "nope.zst"))
    assert missing.code == 2 and "is not a file" in missing.err


def test_sync_commands_parse_and_check_their_input(tmp_path: Path) -> None:
    helped = run_cli(tmp_path, "sync", "--help")
    assert helped.code == 0 and "push|pull|status" in helped.out
    assert "STENO_SYNC_TOKEN" in run_cli(tmp_path, "sync", "push", "--help").out
    assert run_cli(tmp_path, "sync", "push").code == 2  # --to is required
    bad = run_cli(tmp_path, "sync", "pull", "--from", "ftp://elsewhere")
    assert bad.code == 2 and "is not a peer URL" in bad.err
    for batch in ("0", "10001"):  # the request model's bounds, in its words
        big = run_cli(tmp_path, "sync", "push", "--to", "http://127.0.0.1:9", "--batch", batch)
        assert big.code == 2 and "batch=" in big.err and "1 to 10000" in big.err, big.err
    word = run_cli(tmp_path, "sync", "push", "--to", "http://127.0.0.1:9", "--batch", "many")
    assert word.code == 2 and "invalid int value" in word.err
    status = run_cli(tmp_path, "sync", "status")
    assert status.code == 0 and status.out.startswith("No sync peers yet")
    wrong = run_cli(tmp_path, "sync", "status", STENO_SYNC_BATCH="0")
    assert wrong.code == 2 and "STENO_SYNC_BATCH" in wrong.err
