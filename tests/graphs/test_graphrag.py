"""GraphRAG on real stores: determinism, provenance, incremental runs equal a
rebuild, robustness on degenerate stores, typed relations and the graph query."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodes.extract.entities import mentions, mentions_and_occurrences
from nodes.extract.relations import typed_relations
from stenographer.app import App, open_app
from stenographer.settings import Settings
from store.errors import InvalidInput

PEOPLE = ["Alice", "Bob", "Carmen", "Dmitri"]
THINGS = ["PostgreSQL", "Redis", "sqlite-vec", "store/db.py", "nodes/extract/signals.py",
          "ABC-12", "issue #42", "compile_patterns()", "RunContext", "Claude Desktop",
          "deploy pipeline", "pottery class", "retry policy", "https://example.com/docs"]
SHAPES = ["{p}: We decided to use {a} for the {b}.",
          "{p}: The {a} is blocked by {b}.",
          "{p}: I fixed {a} with {b} today.",
          "{p}: {a} replaces {b} in the plan.",
          "{p}: Looking at {a} and {b} again.",
          "{p}: ok, thanks!"]


def corpus(n: int, seed: int = 7, sessions: int = 3) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        a, b = rng.sample(THINGS, 2)
        text = rng.choice(SHAPES).format(p=rng.choice(PEOPLE), a=a, b=b)
        out.append((f"s{i % sessions}", text))
    return out


def fresh(path: Path, **settings: Any) -> App:
    return open_app(Settings(data_dir=path, turn_limit=1_000, **settings))


@pytest.fixture
def app(tmp_path: Path, database_url: str | None) -> Iterator[App]:
    """A store on each backend."""
    opened = fresh(tmp_path / "a", database_url=database_url)
    try:
        yield opened
    finally:
        opened.close()


def ingest(app: App, turns: list[tuple[str, str]]) -> list[int]:
    ids = []
    for session, text in turns:
        out, _ = app.run("ingest", {"role": "user", "content": text, "session_id": session})
        ids.append(out["reply"]["exchange_id"])
    return ids


def extract(app: App, batch_size: int = 1_000) -> list[int]:
    """Run batches until nothing is pending, then communities; the turns of each batch."""
    read = []
    while True:
        out, _ = app.run("graphrag_batch", {"batch_size": batch_size})
        read.append(out["published"]["turns"])
        if out["published"]["remaining"] == 0:
            break
    app.run("graphrag_communities", {})
    return read


def export(app: App, fmt: str = "json") -> str:
    out, _ = app.run("graphrag_export", {"format": fmt})
    reply = out["reply"]
    assert out["exported"] == {"format": fmt, "chars": len(reply["document"])}
    return str(reply["document"])


def test_same_store_and_seed_give_byte_identical_exports(tmp_path: Path):
    turns = corpus(120)
    documents = []
    for name in ("one", "two"):
        app = fresh(tmp_path / name)
        try:
            ingest(app, turns)
            extract(app, batch_size=50)
            documents.append((export(app, "json"), export(app, "graphml")))
            assert export(app, "json") == documents[-1][0]  # stable on re-export
        finally:
            app.close()
    assert documents[0] == documents[1]
    doc = json.loads(documents[0][0])
    assert doc["detection"]["seed"] == 42 and doc["detection"]["communities"] >= 1
    assert documents[0][1].startswith('<?xml version="1.0" encoding="UTF-8"?>')


def test_the_seed_is_recorded_in_the_trace(app: App):
    ingest(app, corpus(30))
    app.run("graphrag_batch", {})
    _, trace = app.run("graphrag_communities", {})
    detect = next(s for s in trace["stages"] if s["node"] == "detect")
    assert detect["writes"]["seed"] == "42"


def test_bulk_values_pass_through_channels_and_show_in_the_trace_by_size(app: App):
    ingest(app, corpus(30))
    out, trace = app.run("graphrag_batch", {})
    writes = {s["node"]: s["writes"] for s in trace["stages"]}
    assert writes["load"]["pending"] == "[30 items]" and "pending" in out
    assert writes["extract"]["records"].startswith("BatchRecords(turns_read=30, aliases={")
    assert out["records"].turns_read == 30 == out["published"]["turns"]
    out, trace = app.run("graphrag_communities", {})
    writes = {s["node"]: s["writes"] for s in trace["stages"]}
    assert writes["load"]["graph_entities"] == f"[{out['graph']['entities']} items]"
    assert out["communities_written"] == len(out["communities"]) >= 1
    assert not hasattr(app.ctx, "scratch")


def test_every_node_and_edge_cites_turns_that_exist_and_name_it(app: App):
    ids = ingest(app, corpus(200, seed=3))
    extract(app, batch_size=64)
    doc = json.loads(export(app))
    with app.store.read() as conn:
        content = dict(conn.execute("SELECT id, content FROM exchanges"))
    assert set(content) == set(ids)
    aliases = {}
    for node in doc["nodes"]:
        assert node["turn_ids"] and len(node["turn_ids"]) == node["turns"]
        aliases[node["id"]] = [a.casefold() for a in node["aliases"]]
        for turn in node["turn_ids"]:
            assert any(a in content[turn].casefold() for a in aliases[node["id"]]), (node, turn)
    assert doc["edges"]
    for edge in doc["edges"]:
        assert edge["turn_ids"]
        ends = (edge["source"], edge["target"])
        named = set()
        for turn in edge["turn_ids"]:
            text = content[turn].casefold()
            found = {e for e in ends if any(a in text for a in aliases[e])}
            assert found, (edge, turn)
            named |= found
        assert named == set(ends), edge
    kinds = {e["kind"] for e in doc["edges"]}
    assert {"co_occurs", "decides", "blocks", "fixes", "replaces"} <= kinds


def test_a_rerun_reads_only_new_turns_and_equals_a_full_rebuild(tmp_path: Path):
    turns = corpus(150, seed=11)
    incremental = fresh(tmp_path / "inc")
    rebuilt = fresh(tmp_path / "full")
    try:
        ingest(incremental, turns[:100])
        assert sum(extract(incremental, batch_size=40)) == 100
        ingest(incremental, turns[100:])
        read = extract(incremental, batch_size=40)
        assert read == [40, 10]  # the 50 new turns only
        out, _ = incremental.run("graphrag_batch", {})
        assert out["published"]["turns"] == 0  # nothing left
        ingest(rebuilt, turns)
        assert sum(extract(rebuilt, batch_size=1_000)) == 150
        assert export(incremental) == export(rebuilt)
        assert export(incremental, "graphml") == export(rebuilt, "graphml")
    finally:
        incremental.close()
        rebuilt.close()


def test_a_worker_extracting_the_next_batch_ahead_gives_the_same_graph(tmp_path: Path):
    """With ``graphrag_prefetch`` the load stage also reads the next batch and the worker
    process extracts it while this one is written: the graph is byte-for-byte the one
    extracted in one process; a batch other than the one prefetched (another size here)
    and a worker killed mid-run are extracted in process instead."""
    turns = corpus(300, seed=5)
    documents, flags = [], []
    for name, ahead in (("alone", 0), ("ahead", 1)):
        app = fresh(tmp_path / name, graphrag_prefetch=ahead)
        try:
            ingest(app, turns)
            seen = []
            for size in (50, 50, 50, 40, 60):  # the 40: not the 50 turns prefetched
                out, trace = app.run("graphrag_batch", {"batch_size": size})
                extract_stage = next(s for s in trace["stages"] if s["node"] == "extract")
                # "this process" or "worker process": a trace records a string's length
                assert extract_stage["writes"]["extracted_in"] == (
                    f"str[{len(out['extracted_in'])}]")
                seen.append(out["extracted_in"] == "worker process")
            if ahead:
                worker = app.ctx.graph_prefetch._worker
                assert worker is not None and worker.poll() is None
                worker.kill()
                worker.wait()
            for _ in range(3):  # 20, 20, 10: the second's was sent to the dead worker
                out, _ = app.run("graphrag_batch", {"batch_size": 20})
                seen.append(out["extracted_in"] == "worker process")
            assert app.ctx.graph_prefetch is None or app.ctx.graph_prefetch._broken
            assert app.run("graphrag_stats", {})[0]["stats"]["pending"] == 0
            app.run("graphrag_communities", {})
            documents.append((export(app), export(app, "graphml")))
            flags.append(seen)
        finally:
            app.close()
    assert documents[0] == documents[1]
    assert flags[0] == [False] * 8
    assert flags[1] == [False, True, True, False, False, False, False, False]
    assert len(json.loads(documents[0][0])["nodes"]) > 10


def test_the_worker_gives_the_same_graph_on_each_backend(
        tmp_path: Path, database_url: str | None, request: pytest.FixtureRequest):
    other_url = None if database_url is None else \
        request.getfixturevalue("postgres_server").database()
    documents, where = [], []
    for name, url, ahead in (("ahead", database_url, 1), ("alone", other_url, 0)):
        app = fresh(tmp_path / name, database_url=url, graphrag_prefetch=ahead)
        try:
            ingest(app, corpus(120, seed=9))
            while True:
                out, _ = app.run("graphrag_batch", {"batch_size": 30})
                where.append(out["extracted_in"])
                if out["published"]["remaining"] == 0:
                    break
            app.run("graphrag_communities", {})
            documents.append((export(app), export(app, "graphml")))
        finally:
            app.close()
    assert where == ["this process"] + ["worker process"] * 3 + ["this process"] * 4
    assert documents[0] == documents[1]


def test_the_worker_answers_each_batch_and_reports_its_errors():
    import io
    import pickle

    from nodes.extract.graph_prefetch import serve
    from nodes.extract.graph_records import batch_records
    from store.graph_batches import PendingTurn

    turns = [PendingTurn(1, 1, "Alice: We decided to use Redis for the cache."),
             PendingTurn(2, 1, "Bob: Redis is blocked by ABC-12.")]
    window = {1: None}
    requests = io.BytesIO()
    pickle.dump((turns, window), requests)
    pickle.dump(("not", "turns"), requests)
    requests.seek(0)
    replies = io.BytesIO()
    serve(requests, replies)  # returns at the end of its input
    replies.seek(0)
    status, records = pickle.load(replies)
    assert status == "ok" and records == batch_records(turns, window)
    assert records.edges  # not an empty record
    status, text = pickle.load(replies)
    assert status == "error" and "Error" in text


def test_reset_forgets_the_graph_and_the_next_run_reads_everything(app: App):
    ingest(app, corpus(20))
    extract(app)
    out, _ = app.run("graphrag_reset", {"confirm": True})
    assert out["reply"]["removed"]["entities"] > 0
    stats = app.run("graphrag_stats", {})[0]["stats"]
    assert stats["entities"] == stats["edges"] == stats["turns_read"] == 0
    assert stats["pending"] == 20
    assert sum(extract(app)) == 20


def test_a_store_with_no_turns(app: App):
    assert extract(app) == [0]
    stats = app.run("graphrag_stats", {})[0]["stats"]
    assert stats["entities"] == 0 and stats["communities"] == 0
    out, _ = app.run("graph_query", {"query": "anything at all", "cross_session": True})
    assert out["graph_result"] == {"entities": [], "relations": [], "communities": [],
                                   "turns": []}
    assert json.loads(export(app))["nodes"] == []


def test_turns_without_entities(app: App):
    ingest(app, [("s", "ok"), ("s", "yes, thanks!"), ("s", "123 456"), ("s", "?!")])
    assert extract(app) == [4]
    stats = app.run("graphrag_stats", {})[0]["stats"]
    assert stats["turns_read"] == 4 and stats["entities"] == 0 and stats["pending"] == 0


def test_a_single_giant_turn(app: App):
    words = [f"Component{i} uses module_{i} in src/pkg{i}/main.py" for i in range(15_000)]
    ingest(app, [("s", ". ".join(words))])
    assert extract(app) == [1]
    stats = app.run("graphrag_stats", {})[0]["stats"]
    assert 0 < stats["entities"] <= 200  # bounded per turn
    assert stats["edges"] <= 8 * 7 // 2 + 10


def test_a_graph_without_edges(app: App):
    # One entity per turn, and no turn before it in its session: no edge at all.
    ingest(app, [(f"s{i}", f"{name}!") for i, name in enumerate(["Redis", "Postgres", "Kafka"])])
    extract(app)
    stats = app.run("graphrag_stats", {})[0]["stats"]
    assert stats["entities"] == 3 and stats["edges"] == 0
    assert stats["communities"] == 0 and stats["detection"]["communities"] == 0
    out, _ = app.run("graph_query", {"query": "Redis", "cross_session": True})
    result = out["graph_result"]
    assert [e["label"] for e in result["entities"]] == ["Redis"]
    assert result["relations"] == [] and [t["snippet"] for t in result["turns"]] == ["Redis!"]


def test_typed_relations_from_decision_blocker_fix_and_replace_sentences():
    def relations(text: str) -> list[tuple[str, str, str]]:
        found, occ = mentions_and_occurrences(text)
        speaker = found[0][0] if found and found[0][2] == "speaker" else None
        return list(typed_relations(text, occ, speaker))

    assert relations("Ana: We went with PostgreSQL.") == [("ana", "postgresql", "decides")]
    assert relations("The release_train is blocked by ABC-12.") == [
        ("ABC-12", "release train", "blocks")]
    assert relations("compile_patterns() fixes #42.") == [("compile patterns", "#42", "fixes")]
    assert relations("We replaced Redis with Postgres.") == [("postgres", "redis", "replaces")]
    assert relations("We switched from MySQL to SQLite.") == [("sqlite", "mysql", "replaces")]
    assert relations("Redis. Postgres fixes nothing") == []  # no target in the sentence


def test_entities_merge_aliases_and_name_their_kinds():
    keys = {m[0]: m[2] for m in mentions(
        "Ana: pip install sqlite-vec; see issue #42, ABC-12, store/db.py, "
        "https://example.com/x and `RunContext`. The pottery classes at Sunset Park.")}
    assert keys == {"ana": "speaker", "sqlite vec": "package", "#42": "issue",
                    "ABC-12": "issue", "store/db.py": "file", "https://example.com/x": "url",
                    "runcontext": "code", "pottery class": "phrase", "sunset park": "name"}
    assert {m[0] for m in mentions("sqlite_vec and SQLite-Vec")} == {"sqlite vec"}


def test_graph_query_ranks_the_neighbourhood_and_cites_turns(app: App):
    ids = ingest(app, [
        ("w", "Ana: The checkout service is blocked by ABC-12."),
        ("w", "Bo: ABC-12 comes from the payments gateway timeout."),
        ("w", "Ana: The payments gateway runs on Kafka."),
        ("w", "Bo: Lunch at noon?"),
        ("other", "Cy: The Kafka upgrade is planned."),
    ])
    extract(app)
    out, trace = app.run("graph_query", {"query": "What blocks the checkout service?",
                                         "session_id": "w", "hops": 2, "limit": 10})
    result = out["graph_result"]
    labels = [e["label"] for e in result["entities"]]
    assert labels[0] == "checkout service" and "ABC-12" in labels
    assert "payments gateway" in labels  # two hops away, through ABC-12
    blocks = [r for r in result["relations"] if r["kind"] == "blocks"]
    assert blocks and blocks[0]["turn_ids"] == [ids[0]]
    turn_ids = [t["exchange_id"] for t in result["turns"]]
    assert turn_ids[0] == ids[0] and ids[4] not in turn_ids and ids[3] not in turn_ids
    assert all(t["session_id"] == "w" for t in result["turns"])
    assert [s["node"] for s in trace["stages"]] == [
        "validate", "seeds", "neighbourhood", "rank", "support", "reply"]
    crossed, _ = app.run("graph_query", {"query": "Kafka", "cross_session": True})
    assert ids[4] in [t["exchange_id"] for t in crossed["graph_result"]["turns"]]


def test_bad_graph_requests_say_what_is_valid(app: App):
    cases = [("graph_query", {"query": "x"}, "session_id is required"),
             ("graph_query", {"query": "x", "session_id": "s", "hops": 9}, "1 to 3"),
             ("graph_query", {"query": "", "session_id": "s"}, "must not be empty"),
             ("graphrag_batch", {"batch_size": 0}, "1 to 100000"),
             ("graphrag_batch", {"since": "yesterday"}, "ISO 8601"),
             ("graphrag_export", {"format": "csv"}, "valid: graphml, json"),
             ("graphrag_reset", {}, "confirm=true"),
             ("graphrag_community", {"community_id": 5}, "no community 5")]
    for graph, request, message in cases:
        with pytest.raises(Exception, match=message) as info:
            app.run(graph, request)
        assert isinstance(info.value, InvalidInput) or "community" in message


def test_community_view_lists_entities_relations_and_sentences_citing_turns(app: App):
    ids = ingest(app, corpus(80, seed=5))
    extract(app)
    listing = app.run("graphrag_community", {"limit": 5})[0]["reply"]
    assert listing["communities"] and listing["total"] >= len(listing["communities"])
    first = listing["communities"][0]
    out = app.run("graphrag_community", {"community_id": first["id"]})[0]["reply"]
    community = out["community"]
    assert community["size"] == first["size"] and community["entities"]
    assert community["relations"]
    assert 1 <= len(out["sentences"]) <= 5
    with app.store.read() as conn:
        content = dict(conn.execute("SELECT id, content FROM exchanges"))
    for sentence in out["sentences"]:
        assert sentence["exchange_id"] in ids
        assert sentence["text"] in " ".join(content[sentence["exchange_id"]].split())
    assert f"Community #{first['id']}" in out["text"]


def test_session_and_since_limit_what_a_run_reads(app: App):
    for session, day, text in [("s1", "01", "Redis and Kafka."), ("s1", "02", "Kafka again."),
                               ("s1", "03", "Redis later."), ("s2", "10", "Postgres here."),
                               ("s2", "11", "Postgres there.")]:
        app.run("ingest", {"role": "user", "content": text, "session_id": session,
                           "created_at": f"2026-01-{day}T10:00:00Z"})
    out, _ = app.run("graphrag_batch", {"session_id": "s2"})
    assert out["published"]["turns"] == 2 and out["published"]["remaining"] == 0
    assert app.run("graphrag_stats", {})[0]["stats"]["pending"] == 3
    out, _ = app.run("graphrag_batch", {"since": "2026-01-03"})
    assert out["published"]["turns"] == 1  # s1's turn of the 3rd; the two older passed over
    stats = app.run("graphrag_stats", {})[0]["stats"]
    assert stats["pending"] == 0 and stats["turns_read"] == 3
    assert app.run("graphrag_batch", {"session_id": "nobody"})[0]["published"]["turns"] == 0


def test_the_provenance_contract_refuses_a_record_that_cites_the_wrong_turn(app: App):
    from nodes.evaluate_contracts.graph_input import graph_batch_contract
    from store.errors import StoreError
    from store.graph_batches import BatchRecords, PendingTurn

    turns = [PendingTurn(1, 1, "Redis is fast."), PendingTurn(2, 1, "Kafka is slow."),
             PendingTurn(3, 1, "Lunch at noon.")]
    records = BatchRecords(turns_read=2, aliases={("redis", "Redis", "name"): 1},
                           entity_turns=[("redis", 2, 1)])  # turn 2 does not name Redis

    with pytest.raises(StoreError, match="does not name it"):
        graph_batch_contract(turns, {}, records)
    records.entity_turns = [("redis", 1, 1)]
    records.edges = {("kafka", "redis", "co_occurs"): 1}
    records.edge_turns = {("kafka", "redis", "co_occurs"): [3]}
    with pytest.raises(StoreError, match="names neither end"):
        graph_batch_contract(turns, {}, records)
    records.edge_turns = {("kafka", "redis", "co_occurs"): [1, 9]}
    with pytest.raises(StoreError, match="#9 outside the batch"):
        graph_batch_contract(turns, {}, records)
    records.edge_turns = {("kafka", "redis", "co_occurs"): [1, 2]}
    assert graph_batch_contract(turns, {}, records)["provenance"]["checked"] is True
    records.edges = {}  # an edge cited but not recorded
    with pytest.raises(StoreError, match="#1, which names neither end"):
        graph_batch_contract(turns, {}, records)


_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)),
                max_size=400) | st.lists(st.sampled_from(
                    ["Ana:", "Redis", "issue", "#42", "ABC-1", "src/x.py", "`RunContext`",
                     "compile_patterns()", "https://x.io/a", "pip install", "numpy", "the",
                     "blocked by", "replaced", "with", "fixes", ".", ",", "\n", "Sunset",
                     "Park", "pottery", "classes", "(", ")"]), max_size=60).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_entities_never_crash_and_always_name_text_of_the_turn(text: str):
    found, occurrences = mentions_and_occurrences(text)
    assert len(found) <= 200 and len({m[0] for m in found}) == len(found)
    folded = text.casefold()
    for _key, surface, kind, start in found:
        assert surface and surface.casefold() in folded, (surface, kind)
        assert text[start:start + len(surface)] == surface
    for key, start, end in occurrences:
        assert key in {m[0] for m in found} and 0 <= start < end <= len(text)
    speaker = found[0][0] if found and found[0][2] == "speaker" else None
    for src, dst, kind in typed_relations(text, occurrences, speaker):
        assert {src, dst} <= {m[0] for m in found} and src != dst and kind


@settings(max_examples=200, deadline=None)
@given(st.lists(_TEXT, min_size=1, max_size=4))
def test_the_token_cache_never_changes_what_is_found(texts: list[str]):
    import nodes.extract.entities as entities

    warm = [mentions_and_occurrences(t) for t in texts]
    entities._PARSED.clear()
    cold = [mentions_and_occurrences(t) for t in texts]
    saved = entities._PARSED_MAX
    entities._PARSED_MAX = 3  # a cache emptied on almost every token
    entities._PARSED.clear()
    try:
        tiny = [mentions_and_occurrences(t) for t in texts]
        assert len(entities._PARSED) <= 3
    finally:
        entities._PARSED_MAX = saved
    assert warm == cold == tiny


def test_pagerank_and_louvain_on_small_and_empty_graphs():
    import numpy as np

    from nodes.extract.graph_algorithms import louvain, pagerank

    assert pagerank(0, np.zeros(0, int), np.zeros(0, int), np.zeros(0)).size == 0
    alone = pagerank(3, np.zeros(0, int), np.zeros(0, int), np.zeros(0))
    assert np.allclose(alone, 1 / 3)
    rank = pagerank(3, np.array([0, 1]), np.array([1, 2]), np.array([1.0, 1.0]))
    assert np.isclose(rank.sum(), 1.0) and rank[1] > rank[0]
    assert louvain(["a", "b"], {}, seed=1, resolution=1.0) == []
    keys = ["a", "b", "c", "d"]
    two = louvain(keys, {(0, 1): 1.0, (2, 3): 1.0, (1, 2): 0.01}, seed=1, resolution=1.0)
    assert two == [[0, 1], [2, 3]]
