"""Forgetting on a real store file: after forgetting a literal, no byte of the database
file (or its write-ahead log) holds it, search cannot find it, the briefs that cited the
turns are rebuilt from their remaining sources, tombstones record ids and hashes (not
the content), and the audit passes. A rejected request changes nothing."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

from stenographer.app import App, open_app
from stenographer.settings import Settings
from store.errors import InvalidInput, NotFound
from store.runs import load_trace
from store.sqlite.search import scope_token

TURN_LIMIT = 4
# Not a credential shape (redaction at ingest would have caught one): a name that must
# leave the record, such as a customer's, is what forgetting is for.
SECRET = "Quartermain-Zebulon-7731"  # never stored outside the test's turns


@pytest.fixture
def app(tmp_path: Path, database_url: str | None) -> Iterator[App]:
    """A store on each backend."""
    app = open_app(Settings(data_dir=tmp_path, turn_limit=TURN_LIMIT,
                            database_url=database_url))
    try:
        yield app
    finally:
        app.close()


def ingest(app: App, session: str, content: str, created_at: str | None = None) -> int:
    out, _ = app.run("ingest", {"role": "user", "content": content, "session_id": session,
                                "created_at": created_at})
    return int(out["reply"]["exchange_id"])


def forget(app: App, **request: Any) -> dict[str, Any]:
    out, _ = app.run("forget", {"confirm": True, **request})
    reply: dict[str, Any] = out["reply"]
    return reply


def audit_passes(app: App) -> bool:
    out, _ = app.run("contract_audit", {})
    return bool(out["report"]["passed"])


def query(app: App, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with app.store.read() as conn:
        return [tuple(r) for r in conn.execute(sql, params)]


def file_bytes(app: App) -> bytes:
    """Every stored byte. SQLite: the database file and whatever its WAL still holds.
    PostgreSQL: the text of every row of every table (its files and WAL are the server's:
    forgetting removes the rows and VACUUMs; the server recycles its pages and WAL)."""
    app.store.traces.flush()
    if app.store.dialect == "postgresql":
        tables = [r[0] for r in query(app, "SELECT tablename FROM pg_tables "
                                           "WHERE schemaname = current_schema()")]
        return "\n".join(str(r[0]) for t in tables
                         for r in query(app, f"SELECT t::text FROM {t} t")).encode()
    base = app.settings.db_path
    return b"".join(p.read_bytes() for p in (base, base.with_name(base.name + "-wal"))
                    if p.exists())


def brief_row(app: App, brief_id: int) -> tuple[Any, ...] | None:
    rows = query(app, "SELECT tier, body, first_exchange_id, last_exchange_id, turns "
                      "FROM briefs WHERE id = ?", (brief_id,))
    return rows[0] if rows else None


def test_forgetting_a_leaked_name_leaves_no_byte_of_it(app: App):
    ids = []
    for i in range(10):
        content = (f"Decision: rotate the deploy key {SECRET} now." if i in (2, 5)
                   else f"Turn {i}: the pipeline config mentions region eu-west-{i}.")
        ids.append(ingest(app, "ops", content))
    ingest(app, "other", f"unrelated but also quotes {SECRET} in passing")
    app.run("milestone", {"session_id": "ops", "exchange_id": ids[1],
                          "label": f"key {SECRET} issued"})
    search, searched = app.run("search", {"query": SECRET, "cross_session": True,
                                          "mode": "keyword"})
    assert search["hits"]  # found; the search's stored trace never held the query
    briefs_before = {bid: brief_row(app, bid) for bid in (1, 2)}
    assert SECRET in briefs_before[1][1]  # the tier-A brief quotes the decision
    assert SECRET.encode() in file_bytes(app)

    reply = forget(app, text=SECRET, reason="leaked customer name")
    assert reply["count"] == 3 and reply["ids"] == [ids[2], ids[5], ids[-1] + 1]
    assert reply["briefs_rebuilt"] == [1, 2] and reply["milestones_removed"] == 1
    assert reply["vacuumed"]
    app.store.traces.flush()
    with app.store.read() as conn:  # kept: it holds no text to purge
        kept = load_trace(conn, searched["run_id"])
    assert kept is not None and SECRET.lower() not in json.dumps(kept).lower()
    assert reply["log_emptied"] == (app.store.dialect == "sqlite")
    assert SECRET not in reply["text"]

    data = file_bytes(app)
    for needle in (SECRET, SECRET.lower(), "rotate the deploy key"):
        assert needle.encode() not in data, needle
    # Rebuilt from the remaining sources: the header and lines cite only surviving turns.
    for bid, (first_id, last_id) in ((1, (ids[0], ids[3])), (2, (ids[4], ids[7]))):
        tier, body, first, last, turns = brief_row(app, bid)  # type: ignore[misc]
        assert (first, last, turns) == (first_id, last_id, TURN_LIMIT - 1)
        assert SECRET not in body and body.startswith(f"Turns #{first_id}–#{last_id} (3)")
        assert f"#{ids[2]}" not in body and f"#{ids[5]}" not in body
        assert tier == "B"  # its only decision was forgotten: excerpts now
        assert briefs_before[bid][0] == "A"
    # Search cannot find it, in either index.
    for mode in ("keyword", "hybrid", "semantic"):
        out, _ = app.run("search", {"query": SECRET, "cross_session": True, "mode": mode})
        assert all(h["exchange_id"] not in reply["ids"] for h in out["hits"]), mode
        assert all(SECRET not in h["snippet"] for h in out["hits"]), mode
        assert mode != "keyword" or out["hits"] == []
    # Tombstones: ids, hashes, time and reason; no content.
    rows = query(app, "SELECT exchange_id, reason, selector, content_hash FROM forgotten "
                      "ORDER BY 1")
    assert [r[0] for r in rows] == reply["ids"]
    assert {(r[1], r[2]) for r in rows} == {("leaked customer name", "text")}
    assert rows[0][3] == hashlib.sha256(
        f"Decision: rotate the deploy key {SECRET} now.".encode()).digest()
    assert audit_passes(app)


def test_forgetting_rebuilds_the_keyword_context_of_the_next_turns(app: App):
    """The next two turns borrow a turn's words into their keyword entry: rebuilt."""
    first = ingest(app, "s", "zebrafish husbandry protocol")
    nxt = ingest(app, "s", "ok, noted")
    if app.store.dialect == "postgresql":
        match = ("SELECT rowid FROM exchanges_fts "
                 "WHERE doc @@ to_tsquery('english', ?) ORDER BY rowid")
        scoped = "SELECT rowid FROM exchanges_fts WHERE session_id = ? ORDER BY rowid"
        scope: Any = 1
    else:
        match = "SELECT rowid FROM exchanges_fts WHERE exchanges_fts MATCH ?"
        scoped, scope = match, f'scope : "{scope_token(1)}"'
    assert [r[0] for r in query(app, match, ("zebrafish",))] == [first, nxt]
    reply = forget(app, exchange_ids=[first])
    assert reply["reindexed"] == 1
    assert query(app, match, ("zebrafish",)) == []
    assert [r[0] for r in query(app, scoped, (scope,))] == [nxt]
    assert audit_passes(app)


def test_forgetting_every_source_removes_the_brief(app: App):
    ids = [ingest(app, "s", f"note {i}") for i in range(TURN_LIMIT + 1)]
    reply = forget(app, exchange_ids=ids[:TURN_LIMIT])
    assert reply["briefs_removed"] == [1] and reply["briefs_rebuilt"] == []
    assert brief_row(app, 1) is None
    assert audit_passes(app)


def test_forgetting_by_session_and_by_time_range(app: App):
    early = [ingest(app, "t", f"early {i}", f"2026-01-0{i + 1}T10:00:00Z") for i in range(3)]
    late = [ingest(app, "t", f"late {i}", f"2026-03-0{i + 1}T10:00:00Z") for i in range(2)]
    keep = [ingest(app, "u", f"keep {i}", "2026-01-02T10:00:00Z") for i in range(2)]
    reply = forget(app, since="2026-01-02", until="2026-02-01", session_id="t")
    assert reply["ids"] == early[1:]
    assert audit_passes(app)
    reply = forget(app, session_id="t")
    assert reply["ids"] == [early[0], *late]
    # The session's chain runs through its tombstones: a new turn links to the head.
    ingest(app, "t", "back again")
    remaining = [r[0] for r in query(app, "SELECT id FROM exchanges ORDER BY id")]
    assert remaining[:2] == keep and len(remaining) == 3
    assert audit_passes(app)
    assert forget(app, session_id="u", text="no such text")["count"] == 0


@pytest.mark.parametrize(("request_", "error"), [
    ({"text": SECRET}, "confirm=true"),
    ({"text": SECRET, "confirm": "yes"}, "confirm=true"),
    ({"confirm": True}, "say what to forget"),
    ({"confirm": True, "text": "abc"}, "at least 4 characters"),
    ({"confirm": True, "exchange_ids": [0]}, "out of range"),
    ({"confirm": True, "exchange_ids": "1"}, "must be a list"),
    ({"confirm": True, "since": "2026-02-01", "until": "2026-01-01"}, "later than since"),
    ({"confirm": True, "since": "yesterday"}, "ISO 8601"),
])
def test_bad_requests_are_rejected_and_change_nothing(app: App, request_: dict[str, Any],
                                                      error: str):
    ingest(app, "s", f"holds {SECRET}")
    before = file_bytes(app)
    with pytest.raises(InvalidInput, match=error) as raised:
        app.run("forget", request_)
    assert SECRET not in str(raised.value)
    with pytest.raises(NotFound):
        app.run("forget", {"confirm": True, "session_id": "nope"})
    assert query(app, "SELECT count(*) FROM exchanges") == [(1,)]
    assert SECRET.encode() in before


SLOW_VFS = "steno-test-slow-sync"


class _SlowSyncFile(apsw.VFSFile):
    def xSync(self, flags: int) -> None:
        time.sleep(0.5)  # a busy disk: the checkpoint holds SQLite's checkpoint lock
        super().xSync(flags)


class _SlowSyncVFS(apsw.VFS):
    def __init__(self) -> None:
        super().__init__(SLOW_VFS, base="")

    def xOpen(self, name: Any, flags: list[int]) -> apsw.VFSFile:
        return _SlowSyncFile("", name, flags)


def test_a_checkpoint_in_flight_does_not_keep_forgotten_pages_in_the_log(tmp_path: Path):
    """The store's checkpoint thread copying the log back when a forget rewrites the
    file: SQLite answers a second checkpoint with SQLITE_BUSY at once, so the forget
    first waits for the one in flight; the log is then emptied and holds no byte of
    what was forgotten."""
    app = open_app(Settings(data_dir=tmp_path, turn_limit=TURN_LIMIT))
    vfs = _SlowSyncVFS()
    try:
        for i in range(6):
            ingest(app, "ops", f"Turn {i}: the deploy key {SECRET} is rotated."
                   if i == 3 else f"Turn {i}: the pipeline runs in eu-west-{i}.")
        store = app.store
        started = threading.Event()

        def slow_checkpoint() -> None:
            conn = apsw.Connection(str(store.path), vfs=SLOW_VFS)
            try:
                started.set()
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            finally:
                conn.close()

        store.checkpoints.wait()
        assert store.checkpoints.start(slow_checkpoint, "wal-checkpoint")
        started.wait(5)
        reply = forget(app, text=SECRET, reason="leaked")
        assert reply["count"] == 1 and reply["log_emptied"]
        data = file_bytes(app)
        assert SECRET.encode() not in data and b"deploy key" not in data
    finally:
        app.close()
        vfs.unregister()
