"""A store made by the first schema opens under the new one: the keyword index is
rebuilt with its new columns, the hashed vectors folded to 128 components, and search
finds the old turns."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nodes.extract.vectors import quantize, text_vector
from stenographer.app import open_app
from stenographer.settings import Settings
from store.migrations import SCHEMA_VERSION
from tests.retrieval.conftest import ids, search
from tests.schema_stores import store_at_schema

OLD_TURNS = [
    ("The ledger reconciliation moved to Fridays.", 1_741_946_400.0),  # 2025-03-14
    ("Kubernetes ingress controller upgraded in staging.", 1_748_858_400.0),  # 2025-06-02
]


def first_schema_store(path: Path) -> list[bytes]:
    """What a store of the first release holds: schema 1, 256-component vectors (returned)."""
    conn = store_at_schema(path, 1)
    blobs = []
    conn.execute("INSERT INTO sessions(id, name, created_at, last_at, turns) "
                 "VALUES (1, 'old', 0, 0, 2)")
    for n, (content, created_at) in enumerate(OLD_TURNS, start=1):
        conn.execute("INSERT INTO exchanges(id, session_id, role, created_at, content, "
                     "content_hash) VALUES (?, 1, 'user', ?, ?, x'00')", (n, created_at, content))
        conn.execute("INSERT INTO exchanges_fts(rowid, body, scope) VALUES (?, ?, 's1')",
                     (n, content))
        old = np.zeros(256, dtype=np.float32)  # the first release's hashing into 256 buckets
        for word in content.lower().split():
            old[hash(word) % 256] += 1.0
        blobs.append(quantize(old / np.linalg.norm(old)))
        conn.execute("INSERT INTO exchange_vectors(rowid, session_id, embedding) "
                     "VALUES (?, 1, vec_int8(?))", (n, blobs[-1]))
    conn.close()
    return blobs


def test_a_first_schema_store_is_upgraded_and_searchable(tmp_path: Path):
    data = tmp_path / "data"
    old_blobs = first_schema_store(data / "steno.db")
    app = open_app(Settings(data_dir=data))
    try:
        conn = app.store.connection()
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations")]
        assert versions == list(range(1, SCHEMA_VERSION + 1))
        assert conn.execute("SELECT value FROM meta WHERE key = 'vector_dim'").fetchone()[0] \
            == "128"
        blobs = [bytes(r[0]) for r in conn.execute(
            "SELECT embedding FROM exchange_vectors ORDER BY rowid")]
        for old, new in zip(old_blobs, blobs, strict=True):  # folded: h % 256 % 128 == h % 128
            folded = np.frombuffer(old, dtype=np.int8).astype(np.float32).reshape(2, 128).sum(0)
            expected = np.frombuffer(quantize(folded / np.linalg.norm(folded)), dtype=np.int8)
            assert np.abs(np.frombuffer(new, dtype=np.int8).astype(int) - expected).max() <= 1
        # Old turns: found by their words and by their month (dated at the upgrade); the
        # derived keyword index, built at the upgrade, gives turn 2 turn 1's words as
        # context, ranked below turn 1's own.
        assert ids(search(app, "ledger reconciliation", "old", mode="keyword"))[:1] == [1]
        assert ids(search(app, "what happened in June?", "old", mode="keyword")) == [2]
        # New turns go in with the new layout beside them.
        out, _ = app.run("ingest", {"role": "user", "content": "Ledger audit is done.",
                                    "session_id": "old"})
        new = out["reply"]["exchange_id"]
        assert set(ids(search(app, "ledger", "old", mode="keyword"))[:2]) == {1, new}
        vec = text_vector("ledger audit", 128)
        assert app.store.vectors.knn(conn, vec, 1, None)[0][0] == new
    finally:
        app.close()
