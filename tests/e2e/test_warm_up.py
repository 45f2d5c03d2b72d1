"""A server warms up once idle after opening: the agent's graphs compiled, their node
modules imported and the store's vector copy loaded before the first search asks."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from stenographer import server
from stenographer.app import WARM_GRAPHS, App, open_app
from stenographer.server import AppLoader
from stenographer.settings import Settings
from tests.e2e.conftest import in_process_env

TURNS = 40


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A store of TURNS turns, and the environment a server opens it from."""
    data = tmp_path / "data"
    app = open_app(Settings(data_dir=data))
    try:
        app.run("ingest_batch", {"turns": [
            {"role": "user", "content": f"turn {i} about the redis cache and its pool",
             "session_id": f"s{i % 4}"} for i in range(TURNS)]})
    finally:
        app.close()
    in_process_env(monkeypatch, data)
    return data


def _opened(loader: AppLoader) -> App:
    return anyio.run(loader.app)


def _warmed(loader: AppLoader) -> None:
    thread = loader._warming
    assert thread is not None
    thread.join(timeout=60)
    assert not thread.is_alive()


def test_an_idle_server_warms_up(data_dir: Path) -> None:
    loader = AppLoader()
    try:
        app = _opened(loader)
        _warmed(loader)
        assert set(WARM_GRAPHS) <= set(app.graphs.engines)
        assert app.store.vectors._n == TURNS  # the copy is loaded: a search adds nothing
        # the first search reads what it needs from the warm copy
        out, _ = app.run("search", {"query": "redis pool", "cross_session": True})
        assert out["reply"]["hits"]
        assert app.store.vectors._n == TURNS
    finally:
        loader.close()


def test_the_warm_up_waits_for_a_pause_in_the_calls(data_dir: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "WARM_IDLE_S", 1.0)
    loader = AppLoader()
    try:
        app = _opened(loader)
        ends = time.monotonic() + 2.5
        while time.monotonic() < ends:  # a call every 0.05 s: never a pause of 1 s
            _opened(loader)
            assert app.store._vectors is None, "warmed up between calls"
            time.sleep(0.05)
        _warmed(loader)
        assert app.store.vectors._n == TURNS
    finally:
        loader.close()


def test_a_server_closed_before_a_pause_does_not_warm_up(data_dir: Path,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    monkeypatch.setattr(server, "WARM_IDLE_S", 30.0)
    loader = AppLoader()
    app = _opened(loader)
    started = time.monotonic()
    loader.close()
    assert time.monotonic() - started < 10  # not waiting out the pause
    assert loader._warming is not None and not loader._warming.is_alive()
    assert app.store._vectors is None


def test_a_server_keeps_its_searches_common_words_without_a_pause(
        data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The FTS5 index's common words (store.sqlite.doc_freq.Words) are a server's from its
    opening, not from its warm-up: a client that never pauses has them after a search."""
    from store.sqlite import doc_freq, search

    monkeypatch.setattr(server, "WARM_IDLE_S", 30.0)
    monkeypatch.setattr(search, "MERGE_FROM", 1)  # a small store keeps them too
    monkeypatch.setattr(doc_freq, "COMMON_ROWS", 1)
    loader = AppLoader()
    try:
        app = _opened(loader)
        app.run("search", {"query": "redis pool", "session_id": "s1"})
        app.store.upkeep.wait()  # type: ignore[attr-defined]
        common = app.store._common  # type: ignore[attr-defined]
        assert common is not None and common.words is not None
        assert common.words.rows_of("redis") == TURNS
        assert app.store._vectors is not None and loader._warming is not None
        assert loader._warming.is_alive()  # still waiting for a pause
    finally:
        loader.close()
