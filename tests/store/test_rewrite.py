"""A file rewrite that a reader holds up outlives the process that forgot: the store
records it pending, and a process watching for pending rewrites (a server) finishes it
once the reader lets go."""

from __future__ import annotations

import time
from pathlib import Path

import apsw

from stenographer.app import open_app
from stenographer.settings import Settings
from tests.bytescan import places_holding

MARKER = "Orsinthal-Quickbeam"


def test_a_rewrite_left_pending_by_a_stopped_process_is_finished_by_the_next(tmp_path: Path):
    app = open_app(Settings(data_dir=tmp_path))
    reader = apsw.Connection(str(tmp_path / "steno.db"))  # another connection, one snapshot
    try:
        for i in range(4):
            app.run("ingest", {"role": "user", "session_id": "s",
                               "content": f"turn {i} names {MARKER}" if i % 2 else f"turn {i}"})
        reader.execute("BEGIN")
        assert reader.execute("SELECT count(*) FROM exchanges").fetchone()[0] == 4
        out, _ = app.run("forget", {"text": MARKER, "confirm": True})
        assert out["reply"]["rewrite_pending"] and out["reply"]["vacuumed"]
    finally:
        app.close()  # stops retrying; the rewrite stays recorded as pending
    app = open_app(Settings(data_dir=tmp_path))
    try:
        status, _ = app.run("status", {})
        assert status["status"]["store"]["rewrite"]["state"] == "pending"
        assert places_holding(tmp_path, MARKER)  # the reader still needs the old pages
        app.store.file_rewrite.watch()
        reader.execute("COMMIT")
        deadline = time.monotonic() + 30
        while app.run("status", {})[0]["status"]["store"]["rewrite"]["state"] != "done":
            assert time.monotonic() < deadline, "the resumed rewrite did not finish"
            time.sleep(0.05)
        assert places_holding(tmp_path, MARKER) == []
    finally:
        app.close()
        reader.close()
