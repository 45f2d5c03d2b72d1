"""Every registered graph compiles and runs on a small real store with a stage trace;
a failing run raises the node's StenoError with graph, node and stage trace attached.

``ng.validate()`` cannot see our registry (docs/neograph.md), so each definition is
compiled and run here instead.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from graphs.registry import (
    BULK,
    CONDITIONS,
    all_definitions,
    build_graphs,
    compile_all,
    node_modules,
)
from graphs.runner import Graphs
from nodes.context import RunContext
from nodes.extract.patterns import compile_patterns
from stenographer.settings import Settings
from store.backend import Backend, open_store
from store.bus import Bus
from store.errors import InvalidInput, NotFound, StenoError
from store.runs import load_trace
from tests.busfile import make_bus

TURN_LIMIT = 3


@pytest.fixture(scope="module")
def graphs() -> Graphs:
    return compile_all(build_graphs())


@pytest.fixture
def store(tmp_path: Path, database_url: str | None) -> Iterator[Backend]:
    """The store on each backend (the SQLite file; a fresh PostgreSQL database)."""
    settings = Settings(data_dir=tmp_path)  # opened as stenographer.app.open_app does
    db = open_store(settings.db_path, database_url=database_url,
                    synchronous=settings.synchronous, vector_dim=settings.vector_dim)
    try:
        yield db
    finally:
        db.close()


def context(store: Backend, tmp_path: Path, turn_limit: int = TURN_LIMIT) -> RunContext:
    return RunContext(store=store, settings=Settings(data_dir=tmp_path, turn_limit=turn_limit),
                      patterns=compile_patterns())


@pytest.fixture
def ctx(store: Backend, tmp_path: Path) -> RunContext:
    return context(store, tmp_path)


def turn(content: str, session: str = "g", role: str = "user") -> dict[str, Any]:
    return {"request": {"role": role, "content": content, "session_id": session}}


def def_nodes(definition: dict[str, Any]) -> set[str]:
    """Node names of a definition, with those of its subgraphs."""
    names = set()
    for name, node in definition["nodes"].items():
        if node["type"] == "subgraph":
            names |= def_nodes(node["definition"])
        else:
            names.add(name)
    return names


def check_trace(trace: dict[str, Any], graph: str, status: str = "Completed") -> list[str]:
    assert set(trace) == {"run_id", "graph", "status", "duration_ms", "stages"}
    assert len(trace["run_id"]) == 32 and trace["graph"] == graph
    assert trace["status"] == status and trace["duration_ms"] >= 0
    assert trace["stages"]
    for stage in trace["stages"]:
        assert set(stage) == {"node", "step", "duration_ms", "writes", "error"}
        assert isinstance(stage["step"], int) and stage["duration_ms"] >= 0
        assert all(isinstance(v, str) and len(v) <= 80 for v in stage["writes"].values())
    nodes = [s["node"] for s in trace["stages"]]
    assert set(nodes) <= def_nodes(DEFINITIONS_BY_NAME[graph])
    return nodes


DEFINITIONS = all_definitions()
DEFINITIONS_BY_NAME = {d["name"]: d for d in DEFINITIONS}


def test_definitions_are_unique_and_use_only_registered_parts():
    assert len(DEFINITIONS_BY_NAME) == len(DEFINITIONS)

    def parts(definition: dict[str, Any]) -> Iterator[tuple[str, str]]:
        for node in definition["nodes"].values():
            if node["type"] == "subgraph":
                yield from parts(node["definition"])
            else:
                yield "node", node["type"]
        for edge in definition.get("conditional_edges", []):
            yield "condition", edge["condition"]

    for definition in DEFINITIONS:
        for kind, name in parts(definition):
            assert name in (node_modules() if kind == "node" else CONDITIONS), (
                definition["name"], name)


def test_every_definition_compiles(graphs: Graphs):
    assert set(graphs.engines) == set(DEFINITIONS_BY_NAME)
    assert set(RUNS) == set(DEFINITIONS_BY_NAME), "add a run case for every new graph"


# --- one run of every graph -----------------------------------------------------------------

Seeded = dict[str, Any]
Case = Callable[[Graphs, RunContext, Seeded], dict[str, Any]]


def seed(graphs: Graphs, ctx: RunContext, tmp_path: Path) -> Seeded:
    """Turns in session g (one brief), and three live turns in session c."""
    ids, briefs = [], []
    for i, content in enumerate(["We decided to use SQLite.", "plain note",
                                 "The build is blocked.", "live one"]):
        out, _ = graphs.run("ingest", turn(content, role=("user", "assistant")[i % 2]), ctx)
        ids.append(out["reply"]["exchange_id"])
        briefs += [b["id"] for b in out["reply"]["compressed"]]
    patient = context(ctx.store, tmp_path, turn_limit=1_000)  # lets turns pile up in c
    for i in range(TURN_LIMIT):
        graphs.run("ingest", turn(f"pending {i}", "c"), patient)
    with ctx.store.read() as conn:
        rows = dict(conn.execute("SELECT name, id FROM sessions"))
    _, trace = graphs.run("status", {"request": {}}, ctx)
    assert len(briefs) == 1
    return {"ids": ids, "brief": briefs[0], "rows": rows, "run_id": trace["run_id"]}


def transcript(ctx: RunContext) -> dict[str, Any]:
    """A Claude Code transcript of one user turn (for capture_read)."""
    path = ctx.store.data_dir / "projects" / "p" / "s.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"type": "user", "uuid": "u1", "sessionId": "s", "message": '
                    '{"role": "user", "content": "captured words"}}\n', encoding="utf-8")
    return {"request": {"kind": "claude-code", "path": str(path), "max_records": 10}}


def bundle(graphs: Graphs, ctx: RunContext) -> dict[str, Any]:
    """A bundle of the seeded store (for sync_import: every turn is already here)."""
    path = ctx.store.data_dir / "seeded.zst"
    graphs.run("sync_export", {"request": {"path": str(path)}}, ctx)
    return {"request": {"path": str(path)}}


UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing listens, the connect fails

RUNS: dict[str, Case] = {
    "ingest": lambda g, c, s: turn("Decision: ship it.", role="tool"),
    "compress": lambda g, c, s: {"session_row": s["rows"]["c"]},
    "search": lambda g, c, s: {"request": {"query": "sqlite", "session_id": "g",
                                           "mode": "hybrid", "limit": 10}},
    "guard": lambda g, c, s: {"request": {"session_id": "g", "query": "sqlite"}},
    "notes": lambda g, c, s: {"request": {"session_id": "g"}},
    "milestone": lambda g, c, s: {"request": {"session_id": "g", "exchange_id": s["ids"][0],
                                              "label": "chose sqlite"}},
    "status": lambda g, c, s: {"request": {}},
    "trace": lambda g, c, s: {"request": {"run_id": s["run_id"]}},
    "inspect_sessions": lambda g, c, s: {"request": {"limit": 10}},
    "inspect_notes": lambda g, c, s: {"request": {"session_id": "g"}},
    "inspect_exchange": lambda g, c, s: {"request": {"exchange_id": s["ids"][0]}},
    "inspect_brief": lambda g, c, s: {"request": {"brief_id": s["brief"]}},
    "inspect_runs": lambda g, c, s: {"request": {"limit": 5, "all_graphs": True}},
    "sessions": lambda g, c, s: {"request": {}},
    "stats": lambda g, c, s: {"request": {}},
    "contract_audit": lambda g, c, s: {"request": {}},
    "forget": lambda g, c, s: {"request": {"exchange_ids": [s["ids"][1]], "confirm": True,
                                           "reason": "test"}},
    "graphrag_batch": lambda g, c, s: {"request": {"batch_size": 100}},
    "graphrag_communities": lambda g, c, s: {"request": {}},
    "graphrag_extract": lambda g, c, s: {"request": {"batch_size": 2}},
    "graph_query": lambda g, c, s: {"request": {"query": "SQLite", "cross_session": True}},
    "graphrag_stats": lambda g, c, s: {"request": {}},
    "graphrag_community": lambda g, c, s: {"request": {"community_id": 1}},
    "graphrag_export": lambda g, c, s: {"request": {"format": "json"}},
    "graphrag_reset": lambda g, c, s: {"request": {"confirm": True}},
    "capture_read": lambda g, c, s: transcript(c),
    "capture": lambda g, c, s: {"request": {
        "sources": [{"kind": "claude-code", "path": transcript(c)["request"]["path"]}],
        "max_records": 10}},
    "ingest_batch": lambda g, c, s: {"request": {"turns": [
        turn("We decided to batch.")["request"], turn("a plain one", role="assistant")["request"],
        {**turn("refused")["request"], "role": "robot"}]}},
    "capture_commit": lambda g, c, s: {"request": {
        "kind": "codex", "path": "/t/rollout.jsonl", "position": 10, "lines": 1,
        "captured": 1, "identity": "1:2", "head": "ab", "session": "x"}},
    "sync_export": lambda g, c, s: {"request": {
        "path": str(c.store.data_dir / "out.zst")}},
    "sync_import": lambda g, c, s: bundle(g, c),
    "sync_push": lambda g, c, s: {"request": {"url": UNREACHABLE, "batch": 2}},
    "sync_pull": lambda g, c, s: {"request": {"url": UNREACHABLE, "batch": 2}},
    "bus_publish": lambda g, c, s: {"request": {"batch": 500}},
    "migrate": lambda g, c, s: {"request": {"to": "copy", "batch": 500}},
    "hook": lambda g, c, s: {"request": {"event": "SessionStart", "session_id": "g",
                                         "source": "compact"}},
    "doctor": lambda g, c, s: {"request": {"data_dir": str(c.store.data_dir)}},
    "graph_catalog": lambda g, c, s: {"request": {
        "definitions": DEFINITIONS, "tools": {"a_tool": "search"}, "commands": {}}},
    "recover": lambda g, c, s: {"request": {}},
    "keyword_index_rebuild": lambda g, c, s: {"request": {}},
}

# Graphs that read the knowledge graph run after it was built from the seeded turns.
NEEDS_GRAPHRAG = {"graphrag_communities", "graph_query", "graphrag_stats",
                  "graphrag_community", "graphrag_export",
                  "graphrag_reset"}


def expect(name: str, out: dict[str, Any]) -> None:
    """What each graph's run on the seeded store must produce."""
    if name == "ingest":
        assert out["reply"]["decisions"] == ["Decision: ship it."]
    elif name == "compress":
        assert [b["turns"] for b in out["briefs"]] == [TURN_LIMIT]
    elif name == "search":
        assert out["hits"][0]["snippet"] == "We decided to use SQLite."
    elif name == "guard":
        assert len(out["briefs"]) == 1 and out["live"]
    elif name == "notes":
        assert "## Compressed briefs" in out["reply"]["markdown"]
    elif name == "milestone":
        assert out["reply"]["label"] == "chose sqlite"
    elif name == "status":
        assert out["status"]["store"]["exchanges"] == 4 + TURN_LIMIT
    elif name == "trace":
        assert out["reply"]["trace"]["graph"] == "status" and out["reply"]["runs"] is None
    elif name == "keyword_index_rebuild":  # PostgreSQL has none beside it
        assert out["reply"]["turns"] == (4 + TURN_LIMIT if out["reply"]["directory"] else 0)
    elif name == "inspect_runs":
        assert 0 < len(out["reply"]["runs"]) <= 5
    elif name == "inspect_sessions":
        reply = out["reply"]
        assert {x["session_id"] for x in reply["sessions"]} == {"g", "c"}
        assert reply["total"] == 2 and reply["counts"]["exchanges"] == 4 + TURN_LIMIT
    elif name == "inspect_notes":
        reply = out["reply"]
        assert reply["found"] and "## Compressed briefs" in reply["markdown"]
        assert reply["session_id"] == "g" and len(reply["briefs"]) == 1
    elif name == "inspect_exchange":
        assert out["reply"]["exchange"]["content"] == "We decided to use SQLite."
        assert out["reply"]["exchange"]["brief"]["tier"] == "A"
    elif name == "inspect_brief":
        sources = out["reply"]["brief"]["sources"]
        assert [x["hash_matches"] for x in sources] == [True] * TURN_LIMIT
    elif name == "sessions":
        assert out["reply"]["total"] == 2 and "sessions 1-2 of 2" in out["reply"]["text"]
    elif name == "stats":
        assert out["reply"]["stats"]["schema"]["current"] is True
        assert out["reply"]["stats"]["counts"]["exchanges"] == 4 + TURN_LIMIT
    elif name == "contract_audit":  # session c holds TURN_LIMIT uncompressed turns
        failed = {c["name"]: c for c in out["reply"]["contracts"] if not c["passed"]}
        assert set(failed) == {"compression_current"}
        assert len(failed["compression_current"]["ids"]) == TURN_LIMIT
    elif name == "forget":
        assert out["reply"]["count"] == 1 and out["reply"]["briefs_rebuilt"] == [1]
    elif name == "graphrag_batch":
        assert out["published"]["turns"] == 4 + TURN_LIMIT
    elif name == "graphrag_extract":  # 2 turns a batch, then the communities
        reply = out["reply"]
        assert (reply["batches"], reply["turns_read"]) == (4, 4 + TURN_LIMIT)
        assert out["stats"]["pending"] == 0 and reply["detection"]["seed"] == 42
    elif name == "graphrag_communities":
        assert out["detection"]["seed"] == 42
    elif name == "graph_query":
        assert out["graph_result"]["entities"][0]["label"] == "SQLite"
    elif name == "graphrag_stats":
        assert out["reply"]["stats"]["turns_read"] == 4 + TURN_LIMIT
    elif name == "graphrag_community":
        assert out["reply"]["community"]["id"] == 1 and out["reply"]["sentences"]
    elif name == "graphrag_export":
        reply = out["reply"]
        assert reply["format"] == "json" and reply["entities"] > 0
        assert len(json.loads(reply["document"])["nodes"]) == reply["entities"]
    elif name == "graphrag_reset":
        assert out["reply"]["removed"]["entities"] > 0
    elif name == "capture_read":
        assert [r["request"]["content"] for r in out["batch"]["records"]] == ["captured words"]
        assert out["batch"]["end"]["position"] > 0 and out["start"]["position"] == 0
    elif name == "capture":  # the transcript's one record, stored through the batch stages
        [report] = out["reply"]["files"]
        assert (report["captured"], report["error"], out["cursor"]["captured"]) == (1, None, 1)
    elif name == "ingest_batch":
        assert (out["reply"]["stored"], out["reply"]["duplicates"]) == (2, 0)
        assert [r["index"] for r in out["reply"]["rejected"]] == [2]
    elif name == "capture_commit":
        assert (out["cursor"]["position"], out["cursor"]["captured"]) == (10, 1)
    elif name == "sync_export":
        assert (out["reply"]["turns"], out["reply"]["sessions"]) == (4 + TURN_LIMIT, 2)
    elif name == "sync_import":
        assert (out["reply"]["applied"], out["reply"]["duplicates"]) == (0, 4 + TURN_LIMIT)
    elif name in ("sync_push", "sync_pull"):
        assert out["reply"]["ok"] is False and "could not be reached" in out["reply"]["error"]
        assert [f["retryable"] for f in out["failures"]] == [True]  # the failure edge's
        assert out["cursor"]["position"] == 0 and out["cursor"]["peer"] == UNREACHABLE
    elif name == "bus_publish":
        assert out["reply"]["ok"] and out["reply"]["published"] == 4 + TURN_LIMIT
        cursor = out["cursor"]
        assert cursor["kind"] == "outbox:bus" and cursor["delivered"] == 4 + TURN_LIMIT
    elif name == "migrate":  # every page, then the audit of the copy
        assert out["reply"]["done"] is True and out["reply"]["resumed"] is False
        assert out["reply"]["copied"]["exchanges"] == out["reply"]["total"]["exchanges"]
        assert out["reply"]["total"]["exchanges"] == 4 + TURN_LIMIT
        failed = {c["name"] for c in out["reply"]["audit"]["contracts"] if not c["passed"]}
        assert failed == {"compression_current"}  # as in the source
    elif name == "hook":  # a SessionStart's briefing: the decision is compressed, the
        # blocker still open
        assert out["task"] == "briefing" and out["query"]["text"]
        text = out["reply"]["briefing"]
        assert out["reply"]["scope"] == "session"
        assert "## Decisions (1, oldest first)\n- #1 We decided to use SQLite." in text
        assert "## Open blockers (1, newest first)\n- #3 The build is blocked." in text
    elif name == "doctor":  # the set-up of the seeded store, which the checks only read
        checks = {c.name: c for c in out["reply"]["checks"]}
        assert list(checks) == ["python", "settings", "sqlite", "sqlite-vec", "data directory",
                                "writable", "free disk", "store", "migrations"]
        assert checks["store"].ok and checks["migrations"].ok, checks
    elif name == "graph_catalog":  # every definition, with its caller
        listed = {g["graph"]: g for g in out["reply"]["graphs"]}
        assert set(listed) == set(DEFINITIONS_BY_NAME)
        assert listed["search"]["tools"] == ["a_tool"] and not listed["ingest"]["tools"]
        assert "search  ←  a_tool" in out["reply"]["text"]
    elif name == "recover":  # session c holds TURN_LIMIT uncompressed turns
        assert len(out["reply"]["recovered"]) == 1 and out["sessions_compressed"] == 1
    else:
        raise AssertionError(f"no expectation for graph {name!r}")


@pytest.mark.parametrize("name", [d["name"] for d in DEFINITIONS])
def test_every_graph_runs_with_a_stage_trace(graphs: Graphs, ctx: RunContext, tmp_path: Path,
                                             name: str, request: pytest.FixtureRequest):
    seeded = seed(graphs, ctx, tmp_path)
    if name in NEEDS_GRAPHRAG:
        graphs.run("graphrag_batch", {"request": {}}, ctx)
        if name != "graphrag_communities":
            graphs.run("graphrag_communities", {"request": {}}, ctx)
    if name == "bus_publish":  # publishes to a real bus file
        ctx = dataclasses.replace(ctx, bus=Bus(make_bus(tmp_path / "veritas-shared")))
    if name == "migrate":  # copies the seeded store into a new file
        target = open_store(tmp_path / "copy" / "steno.db")
        request.addfinalizer(target.close)
        ctx = dataclasses.replace(ctx, store=target, source=ctx.store)
    out, trace = graphs.run(name, RUNS[name](graphs, ctx, seeded), ctx)
    nodes = check_trace(trace, name)
    # The turns, queries, labels and the graph's entities all name SQLite: no trace does.
    assert "sqlite" not in json.dumps(trace).lower()
    first = next(e["to"] for e in DEFINITIONS_BY_NAME[name]["edges"] if e["from"] == "__start__")
    assert nodes[0] == first
    expect(name, out)
    ctx.store.traces.flush()
    with ctx.store.read() as conn:
        assert load_trace(conn, trace["run_id"]) == trace  # persisted as returned


def runs_in_order(nodes: list[str], expected: list[str], absent: tuple[str, ...] = ()) -> bool:
    """``expected`` ran in this order (graphs may grow stages in between); no ``absent``."""
    rest = iter(nodes)
    return all(name in rest for name in expected) and not set(absent) & set(nodes)


def test_compression_inside_ingest_traces_the_subgraph_nodes(graphs: Graphs, ctx: RunContext):
    traces = [graphs.run("ingest", turn(f"note {i}"), ctx)[1] for i in range(TURN_LIMIT)]
    compress = ("batch", "draft", "claim")
    for trace in traces[:-1]:
        assert runs_in_order(check_trace(trace, "ingest"), ["validate", "store", "reply"],
                             absent=compress)
    nodes = check_trace(traces[-1], "ingest")
    assert runs_in_order(nodes, ["validate", "store", *compress, "reply"])


SEARCH_PATHS = {
    "keyword": (["validate", "keyword", "fuse", "page", "reply"], ("vector",)),
    "semantic": (["validate", "vector", "fuse", "page", "reply"], ("keyword",)),
    "hybrid": (["validate", "keyword", "vector", "fuse", "page", "reply"], ()),
}


def test_concurrent_runs_keep_their_stages_apart(graphs: Graphs, ctx: RunContext,
                                                  tmp_path: Path):
    seed(graphs, ctx, tmp_path)
    results: list[tuple[str, list[str]]] = []
    errors: list[BaseException] = []

    def worker(mode: str) -> None:
        try:
            for _ in range(15):
                _, trace = graphs.run("search", {"request": {
                    "query": "sqlite", "session_id": "g", "mode": mode}}, ctx)
                results.append((mode, check_trace(trace, "search")))
        except BaseException as ex:  # reported below
            errors.append(ex)

    threads = [threading.Thread(target=worker, args=(m,))
               for m in ("keyword", "semantic", "hybrid", "keyword")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    assert len(results) == 60
    by_mode: dict[str, set[tuple[str, ...]]] = {}
    for mode, nodes in results:
        assert len(nodes) == len(set(nodes)), nodes  # no stage of another run mixed in
        expected, absent = SEARCH_PATHS[mode]
        assert runs_in_order(nodes, expected, absent), (mode, nodes)
        by_mode.setdefault(mode, set()).add(tuple(nodes))
    assert all(len(paths) == 1 for paths in by_mode.values()), by_mode


# --- failing runs ---------------------------------------------------------------------------

FAILURES = [
    pytest.param("ingest", turn("x", role="boss"), InvalidInput, "validate", "role='boss'",
                 id="ingest-bad-role"),
    pytest.param("ingest", turn("   "), InvalidInput, "validate", "content must not be empty",
                 id="ingest-blank"),
    pytest.param("milestone", {"request": {"session_id": "g", "exchange_id": 10**9,
                                           "label": "x"}},
                 NotFound, "validate", "does not exist", id="milestone-missing-turn"),
    pytest.param("search", {"request": {"query": "x", "session_id": "g", "cursor": "bogus"}},
                 InvalidInput, "validate", "cursor is not valid", id="search-bad-cursor"),
    pytest.param("notes", {"request": {"session_id": "a\tb"}}, InvalidInput, "validate",
                 "control characters", id="notes-bad-session"),
    pytest.param("trace", {"request": {"run_id": "f" * 32}}, NotFound, "load",
                 "no stored run", id="trace-unknown-run"),
]


@pytest.mark.parametrize(("name", "inputs", "error", "node", "message"), FAILURES)
def test_a_failing_run_raises_steno_error_with_its_context(
        graphs: Graphs, ctx: RunContext, tmp_path: Path, name: str, inputs: dict[str, Any],
        error: type[StenoError], node: str, message: str):
    seed(graphs, ctx, tmp_path)
    with pytest.raises(error, match=message) as caught:
        graphs.run(name, inputs, ctx)
    ex = caught.value
    assert ex.graph == name and ex.node == node
    trace = ex.stage_trace  # type: ignore[attr-defined]
    nodes = check_trace(trace, name, status="Failed")
    assert nodes[-1] == node
    assert trace["stages"][-1]["error"].startswith(f"{type(ex).__name__}: ")
    assert all(s["error"] is None for s in trace["stages"][:-1])
    ctx.store.traces.flush()
    with ctx.store.read() as conn:
        assert load_trace(conn, trace["run_id"]) == trace  # failed runs are audited too
    assert not graphs.stages and not graphs.contexts  # nothing left in flight
    assert not graphs.held.values and not graphs.held.by_run


# --- values held outside the engine ---------------------------------------------------------

def test_bulk_values_cross_the_engine_as_tokens_and_reach_nodes_unchanged(ctx: RunContext):
    """Lists, dicts and long strings stay in the runner's table; nodes, route conditions
    and the caller see the real values; append channels still concatenate."""
    seen: dict[str, Any] = {}
    big = [[i, i / 7] for i in range(500)]

    def make() -> dict[str, Any]:
        return {"rows": big, "text": "x" * 1000, "mode": "long", "log": ["made"]}

    def use(rows: Any, text: Any, log: Any) -> dict[str, Any]:
        seen.update(rows=rows, text=text, log=log)
        return {"count": len(rows), "log": [{"used": True}]}

    graphs = Graphs()
    graphs.node_type("make", make)
    graphs.node_type("use", use)
    graphs.condition("by_text", lambda text: "long" if len(text) > 100 else "short")
    graphs.compile({
        "schema_version": 1, "name": "held",
        "channels": {"request": {}, "rows": {}, "text": {}, "mode": {}, "count": {},
                     "log": {"reducer": "append", "initial": []}},
        "nodes": {"make": {"type": "make"}, "use": {"type": "use"}},
        "edges": [{"from": "__start__", "to": "make"}, {"from": "use", "to": "__end__"}],
        "conditional_edges": [{"from": "make", "condition": "by_text",
                               "routes": {"long": "use", "default": "__end__"}}],
    })
    values, trace = graphs.run("held", {"request": {"payload": "y" * 5000}}, ctx)
    assert seen["rows"] is big and seen["text"] == "x" * 1000 and seen["log"] == ["made"]
    assert values["rows"] is big and values["request"] == {"payload": "y" * 5000}
    assert values["count"] == 500 and values["log"] == ["made", {"used": True}]
    assert [s["node"] for s in trace["stages"]] == ["make", "use"]
    assert trace["stages"][0]["writes"]["rows"] == "[500 items]"  # summaries of real values
    assert not graphs.held.values and not graphs.held.by_run


def test_a_graph_looping_over_batches_holds_two_batches_at_most(ctx: RunContext):
    """An overwritten value is let go once two writes old, so a loop over many batches
    does not keep every batch until the run ends; each batch still reaches its node."""
    held_most = 0
    sums: list[int] = []

    def batch(done: Any) -> dict[str, Any]:
        done = done or 0
        return {"rows": list(range(done * 100, done * 100 + 100))}

    def tally(rows: Any, done: Any) -> dict[str, Any]:
        nonlocal held_most
        held_most = max(held_most, len(graphs.held.values))
        sums.append(sum(rows))
        return {"done": (done or 0) + 1}

    graphs = Graphs()
    graphs.node_type("batch", batch)
    graphs.node_type("tally", tally)
    graphs.condition("left", lambda done: "more" if done < 50 else "done")
    graphs.compile({
        "schema_version": 1, "name": "batches",
        "channels": {"request": {}, "rows": {}, "done": {}},
        "nodes": {"batch": {"type": "batch"}, "tally": {"type": "tally"}},
        "edges": [{"from": "__start__", "to": "batch"}, {"from": "batch", "to": "tally"}],
        "conditional_edges": [{"from": "tally", "condition": "left",
                               "routes": {"more": "batch", "default": "__end__"}}],
    }, max_steps=1_000)
    values, _ = graphs.run("batches", {}, ctx)
    assert sums == [sum(range(i * 100, i * 100 + 100)) for i in range(50)]
    assert values["rows"] == list(range(4900, 5000)) and held_most <= 2
    assert not graphs.held.values and not graphs.held.by_run and not graphs.held.recent


def test_a_node_reads_the_messages_of_failed_attempts(ctx: RunContext):
    """The engine's error record has no message: ``run.errors(node)`` has them."""
    attempts: list[int] = []

    def flaky() -> dict[str, Any]:
        attempts.append(1)
        raise ValueError(f"attempt {len(attempts)} failed")

    def handler(failures: Any, *, run: RunContext) -> dict[str, Any]:
        return {"seen": {"errors": run.errors("flaky"), "record": failures}}

    graphs = Graphs()
    graphs.node_type("flaky", flaky)
    graphs.node_type("handler", handler)
    graphs.compile({
        "schema_version": 1, "name": "flaky",
        "channels": {"request": {}, "seen": {},
                     "failures": {"reducer": "append", "initial": []}},
        "nodes": {"flaky": {"type": "flaky"}, "handler": {"type": "handler"}},
        "edges": [{"from": "__start__", "to": "flaky"}, {"from": "flaky", "to": "__end__"},
                  {"from": "handler", "to": "__end__"}],
        "failure_edges": [{"from": "flaky", "to": "handler", "error_channel": "failures"}],
    })
    graphs.retry("flaky", "flaky", 2, 0.001, 0.01, 0.0)
    values, trace = graphs.run("flaky", {}, ctx)
    assert values["seen"]["errors"] == ["attempt 1 failed", "attempt 2 failed",
                                        "attempt 3 failed"]
    (record,) = values["seen"]["record"]
    assert (record["node"], record["kind"], record["attempts"]) == ("flaky", "exhausted", 3)
    assert [s["node"] for s in trace["stages"]] == ["flaky"] * 3 + ["handler"]
    assert not graphs.failed


def test_a_loop_holds_one_pass_of_values_and_the_observer_sees_each_stage(ctx: RunContext):
    """A looping graph overwrites its channels on every pass: the runner keeps at most
    the two latest values of each, and calls the observer after every stage with its writes."""
    held_sizes: list[int] = []
    graphs = Graphs()

    def page(n: Any) -> dict[str, Any]:
        held_sizes.append(len(graphs.held.values))
        n = (n or 0) + 1
        return {"rows": [n] * 100, "n": n}

    graphs.node_type("page", page)
    graphs.condition("more", lambda n: "more" if n < 50 else "done")
    graphs.compile({
        "schema_version": 1, "name": "pages", "channels": {"rows": {}, "n": {}},
        "nodes": {"page": {"type": "page"}},
        "edges": [{"from": "__start__", "to": "page"}],
        "conditional_edges": [{"from": "page", "condition": "more",
                               "routes": {"more": "page", "default": "__end__"}}],
    })
    seen: list[tuple[str, int]] = []
    values, trace = graphs.run("pages", {}, ctx,
                               lambda stage, writes: seen.append((stage["node"], writes["n"])))
    assert values["rows"] == [50] * 100 and len(trace["stages"]) == 50
    assert seen == [("page", n) for n in range(1, 51)]
    assert max(held_sizes) <= 2
    assert not graphs.held.values and not graphs.held.recent and not graphs.observers


def test_a_bulk_graph_runs_with_the_cyclic_collector_paused_and_restores_it(ctx: RunContext):
    """A graph named in ``bulk`` runs with the collector off, failing or not; another
    graph runs with it as it was; and the registry's bulk graphs are real graphs."""
    seen: list[bool] = []

    def probe(request: Any) -> dict[str, Any]:
        seen.append(gc.isenabled())
        if request == "fail":
            raise ValueError("failed on purpose")
        return {}

    graphs = Graphs(bulk=frozenset({"bulk"}))
    graphs.node_type("probe", probe)
    for name in ("bulk", "plain"):
        graphs.compile({"schema_version": 1, "name": name, "channels": {"request": {}},
                        "nodes": {"p": {"type": "probe"}},
                        "edges": [{"from": "__start__", "to": "p"},
                                  {"from": "p", "to": "__end__"}]})
    assert gc.isenabled()
    graphs.run("bulk", {"request": "ok"}, ctx)
    graphs.run("plain", {"request": "ok"}, ctx)
    with pytest.raises(ValueError, match="on purpose"):
        graphs.run("bulk", {"request": "fail"}, ctx)
    assert seen == [False, True, False] and gc.isenabled()
    assert BULK.issubset(d["name"] for d in all_definitions())
    assert {"capture", "sync_import", "ingest_batch"} <= BULK


def test_a_channel_cannot_be_append_in_one_part_of_a_graph_and_overwrite_in_another():
    graphs = Graphs()
    graphs.node_type("noop", lambda: {})
    inner = {"schema_version": 1, "name": "inner", "channels": {"log": {}},
             "nodes": {"a": {"type": "noop"}},
             "edges": [{"from": "__start__", "to": "a"}, {"from": "a", "to": "__end__"}]}
    with pytest.raises(ValueError, match="'log'"):
        graphs.compile({
            "schema_version": 1, "name": "outer",
            "channels": {"log": {"reducer": "append", "initial": []}},
            "nodes": {"sub": {"type": "subgraph", "definition": inner}},
            "edges": [{"from": "__start__", "to": "sub"}, {"from": "sub", "to": "__end__"}],
        })


def test_prepare_imports_the_node_modules_of_every_route_and_subgraph(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A graph's node modules are imported on first run, those of its routes when taken;
    ``prepare`` compiles it and imports them all at once, subgraphs' included."""
    import sys

    from nodes.context import NODES

    for module, fn in (("warm_probe_a", "warm_probe_first"), ("warm_probe_b", "warm_probe_routed"),
                       ("warm_probe_c", "warm_probe_inner")):
        (tmp_path / f"{module}.py").write_text(
            "from nodes.context import node\n\n\n"
            f"@node\ndef {fn}(request):\n    return {{}}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    graphs = Graphs(node_types=NODES, modules={"warm_probe_first": "warm_probe_a",
                                               "warm_probe_routed": "warm_probe_b",
                                               "warm_probe_inner": "warm_probe_c"})
    graphs.condition("never", lambda request: "default")
    inner = {"schema_version": 1, "name": "inner", "channels": {"request": {}},
             "nodes": {"c": {"type": "warm_probe_inner"}},
             "edges": [{"from": "__start__", "to": "c"}, {"from": "c", "to": "__end__"}]}
    definition = {
        "schema_version": 1, "name": "routed", "channels": {"request": {}},
        "nodes": {"a": {"type": "warm_probe_first"}, "b": {"type": "warm_probe_routed"},
                  "sub": {"type": "subgraph", "definition": inner,
                          "input_map": {"request": "request"}}},
        "edges": [{"from": "__start__", "to": "a"}, {"from": "b", "to": "__end__"},
                  {"from": "sub", "to": "__end__"}],
        "conditional_edges": [{"from": "a", "condition": "never",
                               "routes": {"yes": "b", "default": "sub"}}],
    }
    modules = ("warm_probe_a", "warm_probe_b", "warm_probe_c")
    try:
        graphs.compile(definition)
        assert not any(m in sys.modules for m in modules)  # compiled, nothing imported
        graphs.prepare("routed")
        assert all(m in sys.modules for m in modules)
    finally:
        for module, fn in zip(modules, ("warm_probe_first", "warm_probe_routed",
                                        "warm_probe_inner"), strict=True):
            NODES.pop(fn, None)
            sys.modules.pop(module, None)
