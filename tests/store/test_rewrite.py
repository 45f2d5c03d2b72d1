"""A file rewrite that a reader holds up outlives the process that forgot: the store
records it pending, and a process watching for pending rewrites (a server) finishes it
once the reader lets go."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import apsw

from stenographer.app import open_app
from stenographer.settings import Settings
from store.backend import open_store
from store.rewrite import REWRITE_KEYS
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


def test_a_copy_of_the_store_does_not_inherit_the_state_of_its_file(tmp_path: Path):
    app = open_app(Settings(data_dir=tmp_path / "a"))
    target = open_store(tmp_path / "b" / "steno.db")
    try:
        out, _ = app.run("ingest", {"role": "user", "session_id": "s", "content": "gone"})
        app.run("forget", {"exchange_ids": [out["reply"]["exchange_id"]], "confirm": True})
        copying = dataclasses.replace(app.ctx, store=target, source=app.store)
        request = {"to": str(target.location), "batch": 500}
        out, _ = app.graphs.run("migrate", {"request": request}, copying)
        assert out["reply"]["done"]  # the whole copy, meta included
        with app.store.read() as conn:
            source = dict(conn.execute("SELECT key, value FROM meta"))
        with target.read() as conn:
            copied = dict(conn.execute("SELECT key, value FROM meta"))
        assert source["rewrite_done"] and copied["store_id"] == source["store_id"]
        assert not set(REWRITE_KEYS) & set(copied)
    finally:
        target.close()
        app.close()
