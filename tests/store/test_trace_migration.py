"""Stage traces stored by earlier versions summarised channel values by their text (a
turn's neighbours' words, queries, replies, error messages quoting the input). Opening
such a store keeps each run (id, graph, status, stages, durations, the summaries that are
counts) and removes every text from it, on both backends; forgetting a turn afterwards
leaves no byte of it anywhere, with no trace to purge."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stenographer.app import App, open_app
from stenographer.settings import Settings
from store.runs import encode_trace, load_trace
from tests.bytescan import places_holding

MARKER = "Brindleswick"  # a customer's name, say

# As the earlier summariser wrote them: strings and small dicts as JSON text, lists by
# their number of items, larger dicts by their keys, an error with its message.
LEGACY = {
    "run_id": "d2bfd02e0f874c538d03581bfa83b075", "graph": "search", "status": "Failed",
    "duration_ms": 3.5,
    "stages": [
        {"node": "validate", "step": 0, "duration_ms": 0.2, "error": None, "writes": {
            "query": "{text, mode, role, limit, session_row, unknown_session, since, until…}",
            "session": f'"{MARKER}-team"', "max_chars": "8000", "flag": "null",
            "exact": "true", "score": "0.25"}},
        {"node": "fields", "step": 1, "duration_ms": 0.1, "error": None, "writes": {
            "fields": f'{{"context": "payments {MARKER.lower()} asked whether auth…"}}',
            "hits": "[10 items]", "notes": "[]", "empty": "{}"}},
        {"node": "reply", "step": 2, "duration_ms": 0.3,
         "error": f"InvalidInput: role='{MARKER}' is not valid; valid roles: user",
         "writes": {"text": f'"Found 10 hits for \'{MARKER}\' (hybrid…"'}},
    ],
}
KEPT = {
    "run_id": LEGACY["run_id"], "graph": "search", "status": "Failed", "duration_ms": 3.5,
    "stages": [
        {"node": "validate", "step": 0, "duration_ms": 0.2, "error": None, "writes": {
            "query": "{text, mode, role, limit, session_row, unknown_session, since, until…}",
            "session": "(text not kept)", "max_chars": "8000", "flag": "null",
            "exact": "true", "score": "0.25"}},
        {"node": "fields", "step": 1, "duration_ms": 0.1, "error": None, "writes": {
            "fields": "(text not kept)", "hits": "[10 items]", "notes": "[]", "empty": "{}"}},
        {"node": "reply", "step": 2, "duration_ms": 0.3,
         "error": "InvalidInput: (message not kept)",
         "writes": {"text": "(text not kept)"}},
    ],
}
INSERT_RUN = ("INSERT INTO runs(run_id, graph, status, started_at, duration_ms, trace) "
              "VALUES (?, 'search', 'Failed', 0, 1, ?)")
# The migration that strips them, on each backend: not yet applied to a store of then.
UNRECORD = ("DELETE FROM schema_migrations "
            "WHERE name IN ('m013_traces_without_text', 'p002_traces_without_text')")


def stored(trace: dict[str, Any], run_id: str) -> dict[str, Any]:
    return {**trace, "run_id": run_id}


def every_byte(app: App) -> bytes:
    """SQLite: nothing to read here (the test scans the directory once the store is
    closed). PostgreSQL: the text of every row of every table (the server's own files
    and WAL are its to recycle; forgetting deletes the rows and VACUUMs)."""
    if app.store.dialect != "postgresql":
        return b""
    with app.store.read() as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
        return "\n".join(str(r[0]) for t in tables
                         for r in conn.execute(f"SELECT t::text FROM {t} t")).encode()


def test_a_store_of_then_keeps_its_runs_and_forgetting_leaves_no_byte(
        tmp_path: Path, database_url: str | None):
    settings = Settings(data_dir=tmp_path, database_url=database_url)
    app = open_app(settings)  # a store as an earlier version left it
    try:
        app.run("ingest", {"role": "user", "session_id": "crm",
                           "content": f"Call {MARKER} about the renewal."})
        with app.store.write() as conn:
            for n in range(300):  # some pages' worth of them
                conn.execute(INSERT_RUN, (f"{n:032x}", encode_trace(stored(LEGACY, f"{n:032x}"))))
            conn.execute(UNRECORD)
    finally:
        app.close()

    app = open_app(settings)
    try:
        with app.store.read() as conn:
            assert load_trace(conn, f"{7:032x}") == stored(KEPT, f"{7:032x}")
            assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] >= 300
        if database_url is not None:
            assert MARKER.encode() in every_byte(app)  # the row, before it is forgotten
        out, _ = app.run("forget", {"text": MARKER, "confirm": True})
        assert out["reply"]["count"] == 1
        assert MARKER.lower().encode() not in every_byte(app).lower()
    finally:
        app.close()
    assert places_holding(tmp_path, MARKER) == []
