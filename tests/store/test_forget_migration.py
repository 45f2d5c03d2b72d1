"""Migration 10 on a store of schema 9: tombstones take their sync origins out of
``turn_origins`` (a stored turn keeps its row), and a graph that still cites a forgotten
turn is reset so that the next extract rebuilds it from the remaining turns."""

from __future__ import annotations

from pathlib import Path

from stenographer.app import open_app
from stenographer.settings import Settings
from tests.schema_stores import store_at_schema

ORIGIN_GONE, ORIGIN_KEPT = b"\x01" * 32, b"\x02" * 32


def schema_9_store(path: Path, graph_cites_forgotten: bool) -> None:
    conn = store_at_schema(path, 9)
    conn.execute("INSERT INTO sessions(id, name, created_at, last_at, turns) "
                 "VALUES (1, 's', 0, 0, 1)")
    conn.execute("INSERT INTO exchanges(id, session_id, role, created_at, content, "
                 "content_hash, chain_hash) VALUES (1, 1, 'user', 0, 'kept turn', x'00', x'0a')")
    conn.execute("INSERT INTO forgotten(exchange_id, session_id, forgotten_at, reason, "
                 "selector, content_hash, chain_hash) VALUES (2, 1, 0, 'r', 'ids', x'00', x'0b')")
    conn.execute("INSERT INTO turn_origins VALUES (?, 1, 'peer', 0), (?, 2, 'peer', 0)",
                 (ORIGIN_KEPT, ORIGIN_GONE))
    conn.execute("INSERT INTO graph_entities(id, key, kind, label, turns) "
                 "VALUES (1, 'ledger', 'name', 'Ledger', 1)")
    conn.execute("INSERT INTO graph_entity_turns VALUES (1, ?, 1)",
                 (2 if graph_cites_forgotten else 1,))
    conn.execute("INSERT INTO graph_cursors VALUES (1, 2)")
    conn.execute("INSERT INTO meta(key, value) VALUES ('graphrag_turns_read', '2')")
    conn.close()


def test_tombstones_keep_their_origin_and_a_stale_graph_is_reset(tmp_path: Path):
    schema_9_store(tmp_path / "d" / "steno.db", graph_cites_forgotten=True)
    app = open_app(Settings(data_dir=tmp_path / "d"))
    try:
        conn = app.store.connection()
        assert conn.execute("SELECT origin FROM forgotten").fetchall() == [(ORIGIN_GONE,)]
        assert conn.execute("SELECT origin, exchange_id FROM turn_origins").fetchall() == [
            (ORIGIN_KEPT, 1)]
        for table in ("graph_entities", "graph_entity_turns", "graph_cursors"):
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0, table
        assert conn.execute("SELECT count(*) FROM meta WHERE key LIKE 'graphrag_%'"
                            ).fetchone()[0] == 0
    finally:
        app.close()


def test_a_graph_citing_only_stored_turns_is_kept(tmp_path: Path):
    schema_9_store(tmp_path / "d" / "steno.db", graph_cites_forgotten=False)
    app = open_app(Settings(data_dir=tmp_path / "d"))
    try:
        conn = app.store.connection()
        assert conn.execute("SELECT key FROM graph_entities").fetchall() == [("ledger",)]
        assert conn.execute("SELECT through_id FROM graph_cursors").fetchall() == [(2,)]
    finally:
        app.close()
