"""Migration 12 on a store of schema 11: traces stored before the trace dictionary are
recompressed with it and read back the same, the per-session indexes no longer repeat
the primary key, a sync origin is still found by the chain hash index, and every turn
reads the trace id it had (stored only when it is not its session's)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import zstandard

from stenographer.app import open_app
from stenographer.settings import Settings
from store.correlation import exchange_trace
from store.exchanges import exchanges_by_ids
from store.runs import decode_trace, encode_trace, load_trace
from store.sync import KNOWN_ORIGIN, known_origin
from store.trace_dictionary import TRACE_DICTIONARY_V1, TRACE_DICTIONARY_V2
from tests.schema_stores import store_at_schema

CHAIN = bytes(range(32))
TRACES = {1: "VT-20260101-0000000a", 2: "VT-20260101-0000000b", 3: None}
TRACE = {"run_id": "ab" * 16, "graph": "ingest", "status": "Completed", "duration_ms": 1.5,
         "stages": [{"node": "validate", "step": 0, "writes": {"turn": "{session, role}"},
                     "error": None, "duration_ms": 0.1}]}


def schema_11_store(path: Path) -> None:
    conn = store_at_schema(path, 11)
    conn.execute("INSERT INTO sessions(id, name, created_at, last_at, turns, trace_id) "
                 "VALUES (1, 's', 0, 0, 3, 'VT-20260101-0000000a')")
    for n, trace_id in TRACES.items():  # the session's, its own, none (before trace ids)
        conn.execute("INSERT INTO exchanges(id, session_id, role, created_at, content, "
                     "content_hash, chain_hash, trace_id) VALUES (?, 1, 'user', 0, 'a turn', "
                     "x'00', ?, ?)", (n, CHAIN if n == 1 else bytes([n]) * 32, trace_id))
    old_blob = zstandard.ZstdCompressor(level=3).compress(json.dumps(TRACE).encode())
    conn.execute("INSERT INTO runs(run_id, graph, status, started_at, duration_ms, trace) "
                 "VALUES (?, 'ingest', 'Completed', 0, 1.5, ?)", (TRACE["run_id"], old_blob))
    conn.close()


def test_traces_are_recompressed_and_indexes_keyed_by_session_alone(tmp_path: Path):
    data = tmp_path / "data"
    schema_11_store(data / "steno.db")
    app = open_app(Settings(data_dir=data))
    try:
        conn = app.store.connection()
        blob = bytes(conn.execute("SELECT trace FROM runs").fetchone()[0])
        assert blob[:1] == b"\x02" and decode_trace(blob) == TRACE  # the latest dictionary
        assert load_trace(conn, TRACE["run_id"]) == TRACE
        columns = {name: [r[2] for r in conn.execute(f"PRAGMA index_info({name})")]
                   for name in ("exchanges_by_session", "exchanges_live", "briefs_by_session",
                                "milestones_by_session", "forgotten_by_session")}
        assert columns == {name: ["session_id"] for name in columns}
        assert known_origin(conn, CHAIN) and not known_origin(conn, CHAIN[:31] + b"\x00")
        plan = " ".join(str(r[3]) for r in conn.execute("EXPLAIN QUERY PLAN " + KNOWN_ORIGIN,
                                                         (CHAIN,)))
        assert "exchanges_by_chain" in plan
        stored = dict(conn.execute("SELECT id, trace_id FROM exchanges").fetchall())
        assert stored == {1: None, 2: "VT-20260101-0000000b", 3: ""}
        assert {i: ex.trace_id for i, ex in exchanges_by_ids(conn, [1, 2, 3]).items()} == TRACES
        assert {i: exchange_trace(conn, i) for i in TRACES} == TRACES
    finally:
        app.close()


def test_the_trace_dictionary_is_frozen():
    # Stored traces can only be read with the very bytes they were compressed with: a new
    # dictionary needs a new constant and format byte (store.trace_dictionary).
    digest = hashlib.sha256(TRACE_DICTIONARY_V1).hexdigest()
    assert digest == "d0e7c8e09949478a8802abc1927b3d47601be25e4b5d0e35762b28a7a271e83d"
    digest = hashlib.sha256(TRACE_DICTIONARY_V2).hexdigest()
    assert digest == "743654ed3e09e72187247262c250ed1bcf75307d693acbb61f0b64e225c3b8d7"
    assert len(encode_trace(TRACE)) < len(zstandard.ZstdCompressor(level=3).compress(
        json.dumps(TRACE, separators=(",", ":")).encode()))
