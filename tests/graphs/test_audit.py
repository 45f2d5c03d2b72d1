"""The contract audit on real stores, on both backends (a SQLite file; a PostgreSQL
database): an untouched store passes; each tampering done by raw SQL from another
connection is named by exactly its contract and ids; small pages give the same verdict
as one big page; a SQLite store of the previous schema is chained by the migration and
passes."""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import psycopg
import pytest
import sqlite_vec

from graphs.contract_audit import DEFINITION
from stenographer.app import App, open_app
from stenographer.settings import Settings, reveal
from store.errors import NotFound
from store.postgres.connection import PgConnection
from store.provenance import GENESIS, chain_hash
from store.sql import Conn
from tests.schema_stores import store_at_schema

TURN_LIMIT = 4


def ingest(app: App, session: str, content: str) -> int:
    out, _ = app.run("ingest", {"role": "user", "content": content, "session_id": session})
    return int(out["reply"]["exchange_id"])


@pytest.fixture
def app(tmp_path: Path, database_url: str | None) -> Iterator[App]:
    """Two interleaved sessions: `a` with 10 turns (2 briefs), `b` with 6 (1 brief)."""
    app = open_app(Settings(data_dir=tmp_path, turn_limit=TURN_LIMIT,
                            database_url=database_url))
    for i in range(10):
        ingest(app, "a", f"Decision: step {i} of plan alpha." if i % 3 == 0 else f"a note {i}")
        if i < 6:
            ingest(app, "b", f"b note {i} about the parser")
    app.run("milestone", {"session_id": "a", "exchange_id": 1, "label": "kick-off"})
    try:
        yield app
    finally:
        app.close()


def audit(app: App, **request: Any) -> dict[str, Any]:
    out, _ = app.run("contract_audit", request)
    report: dict[str, Any] = out["report"]
    return report


def failures(report: dict[str, Any]) -> dict[str, list[int]]:
    return {c["name"]: sorted(c["ids"]) for c in report["contracts"] if not c["passed"]}


@pytest.fixture
def raw(app: App) -> Iterator[Conn]:
    """Another connection to the same store, as a tamperer would open it: without the
    foreign keys the store's own connections enforce."""
    url = reveal(app.settings.database_url)
    if url is None:
        conn = apsw.Connection(str(app.settings.db_path))
        conn.enable_load_extension(True)
        conn.load_extension(sqlite_vec.loadable_path())
        yield conn
        conn.close()
        return
    with psycopg.connect(url, autocommit=True, cursor_factory=psycopg.ClientCursor) as pg:
        pg.execute("SET session_replication_role = replica")  # foreign keys not enforced
        yield PgConnection(pg)


def turns_of(app: App, session: str) -> list[tuple[int, int | None]]:
    with app.store.read() as conn:
        return [(r[0], r[1]) for r in conn.execute(
            "SELECT e.id, e.brief_id FROM exchanges e JOIN sessions s ON s.id = e.session_id "
            "WHERE s.name = ? ORDER BY e.id", (session,))]


def test_an_untouched_store_passes_every_contract(app: App):
    report = audit(app)
    assert report["passed"] and failures(report) == {}
    checked = {c["name"]: c["checked"] for c in report["contracts"]}
    assert checked["turn_hashes"] == 16 and checked["keyword_index"] == 16
    assert checked["brief_sources"] == 12 and checked["milestones"] == 1
    assert "all 11 contracts hold" in report["text"]
    scoped = audit(app, session_id="b")
    assert scoped["passed"] and scoped["contracts"][0]["checked"] == 6


def test_editing_a_turns_text_is_named_by_turn_hashes(app: App, raw: Conn):
    target = turns_of(app, "a")[5][0]
    raw.execute("UPDATE exchanges SET content = 'nothing happened' WHERE id = ?",
                     (target,))
    report = audit(app)
    assert failures(report) == {"turn_hashes": [target]}
    assert f"#{target}" in report["text"]


def test_editing_a_turns_metadata_breaks_its_chain_link(app: App, raw: Conn):
    target = turns_of(app, "b")[2][0]
    raw.execute("UPDATE exchanges SET role = 'assistant' WHERE id = ?", (target,))
    assert failures(audit(app)) == {"hash_chain": [target]}


def test_deleting_a_source_turn_is_named_with_its_id(app: App, raw: Conn):
    turns = turns_of(app, "a")
    target, brief = turns[2]
    assert brief is not None
    raw.execute("DELETE FROM exchanges WHERE id = ?", (target,))
    assert failures(audit(app)) == {
        "brief_sources": [target],  # the brief cites a turn that is gone
        "hash_chain": [turns[3][0]],  # the next turn no longer links
        "keyword_index": [target],  # index rows without their turn
        "vector_index": [target],
    }


def test_deleting_the_newest_turn_is_caught_by_the_session_head(app: App, raw: Conn):
    turns = turns_of(app, "b")
    conn = raw
    conn.execute("DELETE FROM exchanges WHERE id = ?", (turns[-1][0],))
    conn.execute("DELETE FROM exchanges_fts WHERE rowid = ?", (turns[-1][0],))
    conn.execute("DELETE FROM exchange_vectors WHERE rowid = ?", (turns[-1][0],))
    assert failures(audit(app)) == {"hash_chain": [turns[-2][0]]}


def test_duplicating_a_brief_source_is_named_by_compressed_once(app: App, raw: Conn):
    turns = turns_of(app, "a")
    target, brief = turns[1]
    other = turns[5][1]
    assert brief is not None and other is not None and other != brief
    raw.execute("INSERT INTO brief_sources(brief_id, exchange_id, content_hash) "
                     "SELECT ?, id, content_hash FROM exchanges WHERE id = ?", (other, target))
    report = audit(app)
    assert failures(report) == {"compressed_once": [target]}
    assert any("is a source of 2 briefs" in d for c in report["contracts"]
               for d in c["details"])


def test_dropping_a_keyword_row_is_named_by_keyword_index(app: App, raw: Conn):
    target = turns_of(app, "b")[4][0]
    raw.execute("DELETE FROM exchanges_fts WHERE rowid = ?", (target,))
    report = audit(app)
    assert failures(report) == {"keyword_index": [target]}
    assert failures(audit(app, session_id="b")) == {"keyword_index": [target]}
    assert failures(audit(app, session_id="a")) == {}


def test_dropping_a_vector_and_a_dangling_milestone(app: App, raw: Conn):
    a, b = turns_of(app, "a"), turns_of(app, "b")
    conn = raw
    conn.execute("DELETE FROM exchange_vectors WHERE rowid = ?", (a[7][0],))
    conn.execute("UPDATE milestones SET session_id = (SELECT id FROM sessions WHERE name = 'b')")
    assert failures(audit(app)) == {"vector_index": [a[7][0]], "milestones": [a[0][0]]}
    assert b  # session b is untouched


def test_a_full_batch_left_uncompressed_is_named(app: App):
    """What a crash between an ingest and its compression leaves, until a server starts."""
    patient = open_app(Settings(data_dir=app.settings.data_dir, turn_limit=1_000,
                                database_url=app.settings.database_url))
    try:
        ids = [ingest(patient, "c", f"pending {i}") for i in range(TURN_LIMIT)]
    finally:
        patient.close()
    assert failures(audit(app)) == {"compression_current": ids}
    assert app.finish_compression() != []
    assert audit(app)["passed"]


def test_an_unknown_session_is_an_error(app: App):
    with pytest.raises(NotFound, match="not in the store"):
        audit(app, session_id="nope")


def _settled(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The contracts of a report without the count of stored traces, which grows
    between two audits as the background trace writer stores runs (the first audit's
    own among them)."""
    return [{k: v for k, v in c.items() if not (c["name"] == "trace_retention"
                                                 and k == "checked")}
            for c in report["contracts"]]


def test_small_pages_give_the_same_report(app: App, raw: Conn):
    """Cursors between pages lose and repeat nothing: a 3-record page size over a tampered
    store names the same violations as the default."""
    conn = raw
    a = turns_of(app, "a")
    conn.execute("UPDATE exchanges SET content = 'x' WHERE id = ?", (a[8][0],))
    conn.execute("DELETE FROM exchanges_fts WHERE rowid = ?", (a[0][0],))
    small = copy.deepcopy(DEFINITION)
    small["nodes"]["evidence"]["batch"] = 3
    app.graphs.compile(small, app.graphs.max_steps["contract_audit"])
    try:
        paged = audit(app)
    finally:
        app.graphs.compile(DEFINITION, app.graphs.max_steps["contract_audit"])
    whole = audit(app)
    assert paged["pages"] > 2 * whole["pages"]  # one page per pass at the default size
    assert _settled(paged) == _settled(whole)
    assert failures(whole) == {"turn_hashes": [a[8][0]], "keyword_index": [a[0][0]]}


def test_a_previous_schema_store_is_chained_by_the_migration(tmp_path: Path):
    """Schema 4 had no chain: migration 5 chains the stored turns in session order, and
    the audit of the upgraded store passes."""
    path = tmp_path / "steno.db"
    conn = store_at_schema(path, 4)
    conn.execute("INSERT INTO sessions(id, name, created_at, last_at, turns) "
                 "VALUES (1, 'x', 0, 0, 3), (2, 'y', 0, 0, 2)")
    for n, session in enumerate([1, 2, 1, 2, 1], start=1):
        content = f"old turn {n}"
        conn.execute("INSERT INTO exchanges(id, session_id, role, created_at, content, "
                     "content_hash, source_key) VALUES (?, ?, 'user', ?, ?, ?, ?)",
                     (n, session, 1_700_000_000.0 + n, content,
                      hashlib.sha256(content.encode()).digest(), f"k{n}" if n == 3 else None))
        conn.execute("INSERT INTO exchanges_fts(rowid, body, context, dated, scope) "
                     "VALUES (?, ?, '', '', ?)", (n, content, f"s{session}"))
        conn.execute("INSERT INTO exchange_vectors(rowid, session_id, embedding) "
                     "VALUES (?, ?, vec_int8(?))", (n, session, bytes(128)))
    conn.close()

    app = open_app(Settings(data_dir=tmp_path, turn_limit=TURN_LIMIT))
    try:
        assert audit(app)["passed"]
        rows = app.store.connection().execute(
            "SELECT e.chain_hash, e.content_hash, s.name, e.role, e.created_at, e.source_key, "
            "s.chain_head FROM exchanges e JOIN sessions s ON s.id = e.session_id "
            "WHERE s.name = 'x' ORDER BY e.id").fetchall()
        previous = GENESIS
        for chain, content_hash, name, role, created_at, source_key, _ in rows:
            previous = chain_hash(previous, content_hash, name, role, created_at, source_key,
                                  None)
            assert chain == previous
        assert rows[-1][-1] == previous  # the session head
        # New turns link to the migrated head.
        ingest(app, "x", "a new turn")
        assert audit(app)["passed"]
    finally:
        app.close()
