"""Migration m006_signal_flags on a store of the first schema: old turns keep no trace id,
their session gets one at its next ingest, and flags can be recorded beside them."""

from __future__ import annotations

from pathlib import Path

from stenographer.app import open_app
from stenographer.settings import Settings
from tests.retrieval.test_migrations import first_schema_store


def test_an_old_store_gains_trace_ids_and_flags(tmp_path: Path):
    data = tmp_path / "data"
    first_schema_store(data / "steno.db")
    app = open_app(Settings(data_dir=data))
    try:
        conn = app.store.connection()
        assert [r[0] for r in conn.execute("SELECT trace_id FROM sessions")] == [None]
        out, _ = app.run("ingest", {"role": "assistant", "session_id": "old",
                                    "content": "Ledger: trust me, the totals are right."})
        reply = out["reply"]
        assert reply["nafe"] == ["AUTHORITY_DRIFT"]
        (session_trace,) = conn.execute("SELECT trace_id FROM sessions").fetchone()
        assert reply["trace_id"] == session_trace is not None
        found, _ = app.run("search", {"query": "ledger", "session_id": "old",
                                      "mode": "keyword"})
        traces = {h["exchange_id"]: h["trace_id"] for h in found["hits"]}
        assert traces == {1: None, reply["exchange_id"]: session_trace}
        only_new, _ = app.run("search", {"query": "ledger", "session_id": "old",
                                         "mode": "keyword", "trace_id": session_trace})
        assert [h["exchange_id"] for h in only_new["hits"]] == [reply["exchange_id"]]
        fks = list(conn.execute("PRAGMA foreign_key_list(signal_flags)"))
        assert any(fk[2] == "exchanges" and fk[6] == "CASCADE" for fk in fks)
    finally:
        app.close()
