"""Real coordination-bus files for the tests: the tables the VERITAS
tools create, events written the way they write them, receipts read back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import apsw

__all__ = ["BUS_SCHEMA", "emit", "make_bus", "receipts"]

BUS_SCHEMA = """
CREATE TABLE traces(task_id TEXT PRIMARY KEY, trace_json TEXT NOT NULL);
CREATE TABLE events(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  task_id TEXT NOT NULL,
  event_type TEXT NOT NULL,
  payload TEXT NOT NULL,
  created_at TEXT NOT NULL
);
"""
RECEIPTS_WITH_KEY = "CREATE TABLE receipts(consumer TEXT, event_id INTEGER, " \
    "PRIMARY KEY (consumer, event_id));"
RECEIPTS_PLAIN = "CREATE TABLE receipts(consumer TEXT, event_id INTEGER);"


def make_bus(shared_dir: Path, *, wal: bool = False, receipts_key: bool = True) -> Path:
    """``<shared_dir>/coordination.sqlite`` with the bus tables; rollback-journal mode
    unless ``wal`` (a writer's lock then blocks readers too, as on many installs)."""
    shared_dir.mkdir(parents=True, exist_ok=True)
    path = shared_dir / "coordination.sqlite"
    if path.exists():  # a server shared by a test module: one bus for all its tests
        return path
    conn = apsw.Connection(str(path))
    try:
        if wal:
            conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(BUS_SCHEMA + (RECEIPTS_WITH_KEY if receipts_key else RECEIPTS_PLAIN))
    finally:
        conn.close()
    return path


def emit(path: Path, task_id: str, event_type: str = "CLAEG_TERMINAL_SHUTDOWN", *,
         source: str = "omega-brain", created_at: str = "2026-11-30T06:00:00+00:00",
         **payload: Any) -> int:
    """Append an event as the VERITAS bridge does (``payload`` JSON with ``source``)."""
    conn = apsw.Connection(str(path))
    conn.set_busy_timeout(5_000)
    try:
        row = conn.execute(
            "INSERT INTO events(task_id, event_type, payload, created_at) VALUES (?, ?, ?, ?)"
            " RETURNING id",
            (task_id, event_type, json.dumps({**payload, "source": source}), created_at),
        ).fetchone()
    finally:
        conn.close()
    assert row is not None
    return int(row[0])


def receipts(path: Path) -> list[tuple[str, int]]:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    conn.set_busy_timeout(5_000)
    try:
        return [(str(r[0]), int(r[1])) for r in
                conn.execute("SELECT consumer, event_id FROM receipts ORDER BY rowid")]
    finally:
        conn.close()
