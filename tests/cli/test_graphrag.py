"""`stenographer graphrag ...` as a subprocess on a copy of the seeded store, the
progress line, and a batch interrupted by Ctrl-C (nothing of it stays; the next run
reads the same turns)."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import networkx as nx
import pytest

import nodes.publish.graph_publish
from stenographer.app import open_app
from stenographer.progress import Progress
from stenographer.settings import Settings, SettingsError
from tests.cli.conftest import ALPHA, ALPHA_TURNS, BETA_TURNS, run_cli

TURNS = len(ALPHA_TURNS) + len(BETA_TURNS)


@pytest.fixture
def store_copy(seeded: Path, tmp_path: Path) -> Path:
    target = tmp_path / "data"
    shutil.copytree(seeded, target)
    return target


def test_extract_stats_communities_export_query_reset(store_copy: Path, tmp_path: Path):
    # Each batch's successor is extracted by the worker process while it is written.
    first = run_cli(store_copy, "graphrag", "extract", "--batch-size", "5", "--json",
                    STENO_GRAPHRAG_PREFETCH="1")
    assert first.code == 0, first.err
    report = first.json()
    assert report["turns_read"] == TURNS and report["batches"] == 3
    assert report["detection"]["seed"] == 42
    run = run_cli(store_copy, "trace", report["run_ids"][0], "--json").json()
    # One run: each batch's extract stage; a trace records a string's length only
    # ("this process" for the first batch, "worker process" for the next).
    where = [s["writes"]["extracted_in"] for s in run["stages"] if s["node"] == "extract"]
    assert where == ["str[12]", "str[14]", "str[14]"], where
    again = run_cli(store_copy, "graphrag", "extract", "--json").json()
    assert again["turns_read"] == 0 and again["detection"] is None  # nothing new

    stats = run_cli(store_copy, "graphrag", "stats", "--json").json()
    assert stats["turns_read"] == TURNS and stats["pending"] == 0 and stats["entities"] > 0

    listing = run_cli(store_copy, "graphrag", "communities", "--json")
    assert listing.code == 0
    community = listing.json()["communities"][0]
    shown = run_cli(store_copy, "graphrag", "communities", "--id", str(community["id"]))
    assert shown.code == 0 and "Representative sentences:" in shown.out
    assert run_cli(store_copy, "graphrag", "communities", "--id", "999").code == 2

    path = tmp_path / "graph.graphml"
    exported = run_cli(store_copy, "graphrag", "export", "--format", "graphml", "-o", str(path))
    assert exported.code == 0, exported.err
    graph = nx.read_graphml(path)  # what Gephi and similar tools read
    assert graph.number_of_nodes() == stats["entities"]
    assert graph.number_of_edges() == stats["edges"]
    assert all(data["turn_ids"] for _, data in graph.nodes(data=True))
    as_json = run_cli(store_copy, "graphrag", "export", "--format", "json").json()
    assert len(as_json["nodes"]) == stats["entities"]

    query = run_cli(store_copy, "graphrag", "query", "deploy pipeline cache", "--session",
                    ALPHA, "--json")
    assert query.code == 0 and query.json()["turns"]
    nothing = run_cli(store_copy, "graphrag", "query", "zebra quantum", "--all")
    assert nothing.code == 1

    refused = run_cli(store_copy, "graphrag", "reset")
    assert refused.code == 2 and "--yes" in refused.err
    assert run_cli(store_copy, "graphrag", "reset", "--yes").code == 0
    assert run_cli(store_copy, "graphrag", "stats", "--json").json()["pending"] == TURNS
    alone = run_cli(store_copy, "graphrag", "extract", "--batch-size", "5",
                    STENO_GRAPHRAG_PREFETCH="0")
    assert alone.code == 0, alone.err  # in one process: the same graph
    assert run_cli(store_copy, "graphrag", "export", "--format", "json").json() == as_json


def test_the_prefetch_setting(tmp_path: Path):
    assert Settings.from_env({"STENO_GRAPHRAG_PREFETCH": "0"}).graphrag_prefetch == 0
    assert Settings.from_env({"STENO_GRAPHRAG_PREFETCH": "2500"}).graphrag_prefetch == 2500
    for bad in ("-1", "100001", "soon"):
        with pytest.raises(SettingsError, match="STENO_GRAPHRAG_PREFETCH"):
            Settings.from_env({"STENO_GRAPHRAG_PREFETCH": bad})
    app = open_app(Settings(data_dir=tmp_path, graphrag_prefetch=0))
    try:
        assert app.ctx.graph_prefetch is None
    finally:
        app.close()


def test_bad_options_exit_2(store_copy: Path):
    assert run_cli(store_copy, "graphrag", "extract", "--batch-size", "0").code == 2
    assert run_cli(store_copy, "graphrag", "extract", "--since", "soon").code == 2
    assert run_cli(store_copy, "graphrag", "query", "x", "--session", ALPHA,
                   "--hops", "7").code == 2


def test_the_progress_line_shows_rate_and_time_left():
    progress = Progress("graphrag extract", total=1_000, stream=io.StringIO(), unit="turns")
    with progress:
        progress.advance(250)
        line = progress.line()
    assert "250/1000" in line and "turns/s" in line and "ETA" in line


def test_an_interrupted_batch_leaves_nothing_and_the_next_run_reads_it_again(
        store_copy: Path, monkeypatch: pytest.MonkeyPatch):
    """Ctrl-C during the second batch's write: the first batch stays, the second is
    rolled back, and the next extraction reads from there."""
    app = open_app(Settings(data_dir=store_copy))
    try:
        real = nodes.publish.graph_publish.write_batch
        calls = []

        def interrupted(conn, records):  # type: ignore[no-untyped-def]
            written = real(conn, records)  # the second: all written, then Ctrl-C
            calls.append(records)          # before the commit
            if len(calls) == 2:
                raise KeyboardInterrupt
            return written

        monkeypatch.setattr(nodes.publish.graph_publish, "write_batch", interrupted)
        with pytest.raises(KeyboardInterrupt):
            app.run("graphrag_extract", {"batch_size": 4})
        monkeypatch.undo()
        stats = app.run("graphrag_stats", {})[0]["stats"]
        assert stats["turns_read"] == 4 and stats["pending"] == TURNS - 4
        out, _ = app.run("graphrag_extract", {"batch_size": 4})
        assert out["tally"]["turns_read"] == TURNS - 4 and out["stats"]["pending"] == 0
    finally:
        app.close()
