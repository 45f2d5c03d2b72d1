"""Forgetting also takes back what later features derived from a forgotten turn:
the GraphRAG graph (entities, aliases, edges, provenance, cursors, communities), NAFE
flags (with their span text), sync origins; a CLAEG shutdown turn is forgotten like any
other. Real stores on disk; the graph after ``graphrag extract`` is compared with a full
rebuild on the remaining turns."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nodes.publish import forgotten_graph
from nodes.publish.forgotten_graph import ranges
from stenographer.app import App, open_app
from stenographer.settings import Settings
from tests.graphs.test_graphrag import corpus, export, extract

SECRET = "Quorravex"  # extracted as a name entity (key 'quorravex')
SECRET_FILE = "quorravex_vault.py"  # and as a file entity


def fresh(path: Path) -> App:
    return open_app(Settings(data_dir=path, turn_limit=1_000))


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    opened = fresh(tmp_path / "a")
    try:
        yield opened
    finally:
        opened.close()


def turns_with_secret(n: int = 90) -> list[tuple[str, str]]:
    """A corpus over three sessions; four turns in two sessions name the secret, one of
    them right before a turn that co-occurs with it across the window."""
    turns = corpus(n, seed=5)
    for i in (10, 13, 40, 41):
        session, _ = turns[i]
        turns[i] = (session, f"Alice: We decided to use {SECRET} for the deploy pipeline "
                             f"and {SECRET_FILE} with Redis.")
    return turns


def ingest(app: App, turns: list[tuple[str, str]]) -> list[int]:
    ids = []
    for session, text in turns:
        out, _ = app.run("ingest", {"role": "user", "content": text, "session_id": session})
        ids.append(int(out["reply"]["exchange_id"]))
    return ids


def forget(app: App, **request: Any) -> dict[str, Any]:
    out, _ = app.run("forget", {"confirm": True, **request})
    reply: dict[str, Any] = out["reply"]
    return reply


def file_bytes(app: App) -> bytes:
    app.store.traces.flush()
    base = app.store.path
    return b"".join(p.read_bytes() for p in (base, base.with_name(base.name + "-wal"))
                    if p.exists())


def audit_passes(app: App) -> bool:
    out, _ = app.run("contract_audit", {})
    return bool(out["report"]["passed"])


def stats(app: App) -> dict[str, Any]:
    out: dict[str, Any] = app.run("graphrag_stats", {})[0]["stats"]
    return out


def counts(app: App) -> dict[str, Any]:
    """The stats without the detection's timings."""
    out = stats(app)
    if out["detection"]:
        out["detection"] = {k: v for k, v in out["detection"].items()
                            if not k.endswith("_ms")}
    return out


def out_of_communities(document: str) -> dict[str, Any]:
    """An export without what community detection writes."""
    doc = json.loads(document)
    for node in doc["nodes"]:
        node.pop("community", None)
        node.pop("centrality", None)
    return {"nodes": doc["nodes"], "edges": doc["edges"]}


def test_forgetting_an_extracted_entity_leaves_no_trace_and_extract_equals_a_rebuild(
        tmp_path: Path):
    turns = turns_with_secret()
    kept, rebuilt = fresh(tmp_path / "kept"), fresh(tmp_path / "rebuilt")
    try:
        ingest(kept, turns)
        extract(kept, batch_size=25)
        before = json.loads(export(kept))
        assert {"quorravex", "quorravex_vault.py"} <= {n["id"] for n in before["nodes"]}
        assert SECRET.encode() in file_bytes(kept)

        reply = forget(kept, text=SECRET, reason="leaked codename")
        assert reply["count"] == 4
        graph = reply["graph"]
        assert graph["sessions_rederived"] == len({turns[i][0] for i in (10, 13, 40, 41)})
        assert graph["entities_removed"] >= 2 and graph["edges_removed"] >= 1
        assert not graph["reset"] and "GraphRAG" in reply["text"]
        assert SECRET not in reply["text"]
        # Gone at once: from the export, the stats and every byte of the file.
        document = export(kept)
        assert SECRET.lower() not in document.lower()
        assert "quorravex" not in export(kept, "graphml").lower()
        data = file_bytes(kept).lower()
        for needle in (SECRET.lower(), SECRET_FILE):
            assert needle.encode() not in data, needle
        forgotten = set(reply["ids"])
        conn = kept.store.connection()
        for table in ("graph_entity_turns", "graph_edge_turns"):
            cited = {int(r[0]) for r in conn.execute(f"SELECT exchange_id FROM {table}")}
            assert not cited & forgotten, table
        assert stats(kept)["stale"]
        assert audit_passes(kept)

        # The next extract re-reads the affected sessions and equals a full rebuild on
        # the remaining turns (same ids: the rebuilt store forgets before extracting).
        ingest(rebuilt, turns)
        assert forget(rebuilt, text=SECRET)["graph"]["sessions_rederived"] == 0
        extract(rebuilt)
        # Entities, aliases, edges and provenance equal the rebuild's at once; only the
        # communities wait for the next extract.
        graph_only = ("communities", "stale", "detection", "pending")
        assert ({k: v for k, v in counts(kept).items() if k not in graph_only}
                == {k: v for k, v in counts(rebuilt).items() if k not in graph_only})
        assert out_of_communities(export(kept)) == out_of_communities(export(rebuilt))
        extract(kept, batch_size=25)
        assert export(kept) == export(rebuilt)
        assert export(kept, "graphml") == export(rebuilt, "graphml")
        assert counts(kept) == counts(rebuilt)
        assert audit_passes(kept)
    finally:
        kept.close()
        rebuilt.close()


def test_forgetting_the_turn_before_a_window_edge_and_a_whole_session(tmp_path: Path):
    turns = corpus(60, seed=9)
    kept, rebuilt = fresh(tmp_path / "kept"), fresh(tmp_path / "rebuilt")
    try:
        ids = ingest(kept, turns)
        ingest(rebuilt, turns)
        extract(kept, batch_size=7)
        first = forget(kept, exchange_ids=[ids[3], ids[4]])  # sessions s0 and s1
        assert first["graph"]["sessions_rederived"] == 2
        second = forget(kept, session_id="s2")
        assert second["graph"]["sessions_rederived"] == 1 and second["count"] == 20
        forget(rebuilt, exchange_ids=[ids[3], ids[4]])
        forget(rebuilt, session_id="s2")
        extract(kept, batch_size=7)
        extract(rebuilt)
        assert export(kept) == export(rebuilt)
        assert counts(kept) == counts(rebuilt)
    finally:
        kept.close()
        rebuilt.close()


def test_a_turn_the_graph_has_not_read_leaves_the_graph_alone(app: App):
    ids = ingest(app, corpus(20, seed=3))
    extract(app)
    before = export(app)
    late = ingest(app, [("s0", f"Bob: Looking at {SECRET} and Redis again.")])
    reply = forget(app, exchange_ids=late)
    assert reply["graph"] == {"sessions_rederived": 0, "entities_removed": 0,
                              "edges_removed": 0, "reset": False}
    assert "GraphRAG" not in reply["text"]
    assert export(app) == before and not stats(app)["stale"]
    assert ids


def test_a_session_partly_passed_over_by_since_resets_the_graph(app: App):
    for i, text in enumerate(("Alice: We decided to use PostgreSQL for the retry policy.",
                              f"Bob: {SECRET} replaces Redis in the plan.")):
        app.run("ingest", {"role": "user", "content": text, "session_id": "s0",
                           "created_at": f"2026-01-0{i + 1}T00:00:00Z"})
    out, _ = app.run("ingest", {"role": "user", "session_id": "s0",
                                "content": "Carmen: Looking at sqlite-vec and Redis again.",
                                "created_at": "2026-06-01T00:00:00Z"})
    ids = [int(out["reply"]["exchange_id"])]
    out, _ = app.run("graphrag_batch", {"since": "2026-03-01T00:00:00Z"})
    assert out["published"]["turns"] == 1  # the first two were passed over
    reply = forget(app, exchange_ids=ids)
    assert reply["graph"]["reset"] and "reset" in reply["text"]
    assert stats(app)["entities"] == 0 and stats(app)["pending"] == 2
    extract(app)
    assert "quorravex" in export(app).lower()  # the remaining turns, all read this time
    assert audit_passes(app)


def test_the_audit_finds_derived_rows_that_still_cite_a_forgotten_turn(app: App):
    ids = ingest(app, corpus(12, seed=4))
    extract(app)
    gone = forget(app, exchange_ids=[ids[5]])["ids"]
    assert audit_passes(app)
    out, _ = app.run("contract_audit", {})
    checked = {c["name"]: c["checked"] for c in out["report"]["contracts"]}
    assert checked["forgotten_derived"] == 1
    # Rows a forgetting without this repair would have left behind.
    with app.store.write() as conn:
        conn.execute("INSERT INTO graph_entity_turns SELECT id, ?, 1 FROM graph_entities "
                     "LIMIT 1", (gone[0],))
        conn.execute("INSERT INTO turn_origins VALUES (x'ff', ?, 'peer', 0)", (gone[0],))
    out, _ = app.run("contract_audit", {})
    (found,) = [c for c in out["report"]["contracts"] if c["name"] == "forgotten_derived"]
    assert not out["report"]["passed"] and found["ids"] == gone
    assert "1 graph entity row, 1 sync origin row" in found["details"][0]


@pytest.mark.parametrize("seed", range(6))
def test_forgetting_any_turns_then_extract_equals_a_rebuild(tmp_path: Path, seed: int,
                                                            monkeypatch: pytest.MonkeyPatch):
    """Random forgotten sets (runs of neighbours, a session's first and last turns, turns
    not yet read) over two forgets, re-derived in pages of 2 turns for odd seeds: the
    graph equals a rebuild on the remaining turns."""
    if seed % 2:
        monkeypatch.setattr(forgotten_graph, "PAGE_TURNS", 2)
    rng = random.Random(seed)
    turns = corpus(48, seed=seed, sessions=2)
    kept, rebuilt = fresh(tmp_path / "kept"), fresh(tmp_path / "rebuilt")
    try:
        ids = ingest(kept, turns[:40])
        extract(kept, batch_size=rng.choice((5, 13, 100)))
        ids += ingest(kept, turns[40:])  # not read yet
        first = sorted({*rng.sample(ids, 6), ids[0], ids[-1], *ids[20:23]})
        second = sorted(rng.sample([i for i in ids if i not in first], 4))
        for chosen in (first, second):
            forget(kept, exchange_ids=chosen)
            assert audit_passes(kept)
        ingest(rebuilt, turns)
        forget(rebuilt, exchange_ids=first + second)
        extract(kept, batch_size=7)
        extract(rebuilt)
        assert export(kept) == export(rebuilt)
        assert counts(kept) == counts(rebuilt)
    finally:
        kept.close()
        rebuilt.close()


def test_ranges_cover_each_run_with_its_neighbours_once():
    ids = list(range(1, 11))
    assert ranges(ids, {4}) == ([(2, 5)], {3, 4, 5})
    assert ranges(ids, {4, 5}) == ([(2, 6)], {3, 4, 5, 6})
    assert ranges(ids, {1}) == ([(0, 2)], {1, 2})
    assert ranges(ids, {10}) == ([(8, 9)], {9, 10})
    assert ranges(ids, {3, 6}) == ([(1, 7)], {2, 3, 4, 5, 6, 7})  # overlapping: merged
    assert ranges(ids, {2, 8}) == ([(0, 3), (6, 9)], {1, 2, 3, 7, 8, 9})
    assert ranges(ids, {42}) == ([], set())
