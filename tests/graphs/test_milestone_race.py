"""A milestone marked while its turn is being compressed still makes the brief tier A,
on both backends: the compression reads the labels again once it holds the turns, and
marking reads the turn's brief under the turns' lock (PostgreSQL) or after the
compression's write (SQLite, whose writes run one at a time).

The compress graph is run stage by stage here (its own node functions on the real
store) so that a milestone can be marked between reading the batch and claiming it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from graphs.registry import build_graphs
from graphs.runner import Graphs, call
from nodes.context import RunContext
from nodes.extract.brief import brief_draft
from nodes.extract.patterns import compile_patterns
from nodes.load_evidence.compression import compression_batch
from nodes.publish.brief import claimed_brief
from stenographer.settings import Settings
from store.backend import Backend, open_store
from store.briefs import BriefDraft, briefs_by_ids, claim_brief
from store.exchanges import session_row_id
from tests.pg_server import PostgresServer

TURN_LIMIT = 3
WAIT_S = 10.0  # bound of every wait below


@pytest.fixture(scope="module")
def graphs() -> Graphs:
    return build_graphs()


def _open(tmp_path: Path, database_url: str | None) -> Backend:
    settings = Settings(data_dir=tmp_path)
    return open_store(settings.db_path, database_url=database_url,
                      synchronous=settings.synchronous, vector_dim=settings.vector_dim)


@pytest.fixture
def store(tmp_path: Path, database_url: str | None) -> Iterator[Backend]:
    db = _open(tmp_path, database_url)
    try:
        yield db
    finally:
        db.close()


def _context(store: Backend, tmp_path: Path, turn_limit: int) -> RunContext:
    return RunContext(store=store, settings=Settings(data_dir=tmp_path, turn_limit=turn_limit),
                      patterns=compile_patterns())


class _Stages:
    """The compress graph's channels, for running its stages one at a time."""

    def __init__(self, ctx: RunContext, session_row: int) -> None:
        self.ctx = ctx
        self.values: dict[str, Any] = {"session_row": session_row}

    def run(self, node: Any) -> dict[str, Any]:
        """Run one node on these channels; returns its writes."""
        return call(node, self.values, self.ctx)


def _session(graphs: Graphs, store: Backend, tmp_path: Path) -> tuple[list[int], _Stages]:
    """Three plain turns left uncompressed, and the compression's batch read (tier B)."""
    patient = _context(store, tmp_path, turn_limit=1_000)
    ids = [graphs.run("ingest", {"request": {"role": "user", "content": f"routine note {i}",
                                             "session_id": "m"}}, patient)[0]["reply"]
           ["exchange_id"] for i in range(TURN_LIMIT)]
    with store.read() as conn:
        row = session_row_id(conn, "m")
    assert row is not None
    stages = _Stages(_context(store, tmp_path, TURN_LIMIT), row)
    stages.values.update(stages.run(compression_batch))
    stages.values.update(stages.run(brief_draft))
    assert stages.values["draft"]["tier"] == "B"  # no decision, no milestone yet
    return ids, stages


def _mark(graphs: Graphs, ctx: RunContext, exchange_id: int, label: str) -> dict[str, Any]:
    out, _ = graphs.run("milestone", {"request": {"session_id": "m", "exchange_id": exchange_id,
                                                  "label": label}}, ctx)
    return dict(out["reply"])


def test_a_milestone_marked_after_the_batch_was_read_makes_the_brief_tier_a(
        graphs: Graphs, store: Backend, tmp_path: Path):
    ids, stages = _session(graphs, store, tmp_path)
    reply = _mark(graphs, stages.ctx, ids[1], "cutover done")
    assert reply["brief_id"] is None  # not compressed yet
    [made] = stages.run(claimed_brief)["briefs"]
    assert made["tier"] == "A"
    with store.read() as conn:
        brief = briefs_by_ids(conn, [made["id"]])[made["id"]]
    assert brief.tier == "A" and f"- #{ids[1]} cutover done" in brief.body.splitlines()


def _waiting_on_a_lock(url: str) -> bool:
    with psycopg.connect(url, autocommit=True) as pg:
        row = pg.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                         "current_database() AND wait_event_type = 'Lock'").fetchone()
    return bool(row and row[0])


def test_marking_a_turn_that_a_compression_is_claiming_waits_and_promotes_its_brief(
        graphs: Graphs, postgres_server: PostgresServer, tmp_path: Path):
    url = postgres_server.database()
    store = _open(tmp_path, url)
    try:
        ids, stages = _session(graphs, store, tmp_path)
        batch = stages.values["batch"]
        replies: list[dict[str, Any]] = []
        marking = threading.Thread(target=lambda: replies.append(
            _mark(graphs, stages.ctx, ids[1], "cutover done")))
        with store.write() as conn:  # the compression's claim, not committed yet
            brief_id = claim_brief(conn, BriefDraft(
                session_id=stages.values["session_row"], tier="B", body="Turns (a draft)",
                created_at=time.time(),
                sources=tuple((t["id"], bytes.fromhex(t["hash"])) for t in batch)))
            marking.start()
            deadline = time.monotonic() + WAIT_S
            while not _waiting_on_a_lock(url):
                assert marking.is_alive(), f"marking did not wait for the claim: {replies}"
                assert time.monotonic() < deadline, "marking neither waited nor finished"
                time.sleep(0.01)
        marking.join(WAIT_S)
        assert not marking.is_alive()
        [reply] = replies
        assert reply["brief_id"] == brief_id and reply["promoted"] is True
        with store.read() as conn:
            brief = briefs_by_ids(conn, [brief_id])[brief_id]
        assert brief.tier == "A" and f"- #{ids[1]} cutover done" in brief.body.splitlines()
    finally:
        store.close()
