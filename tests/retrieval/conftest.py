"""Retrieval tests run the real graphs on a real store (a fresh one per test)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stenographer.app import App, open_app
from stenographer.settings import Settings


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    opened = open_app(Settings(data_dir=tmp_path / "data", turn_limit=1_000))
    try:
        yield opened
    finally:
        opened.close()


def ingest(app: App, session: str, content: str, *, role: str = "user",
           created_at: str | None = None) -> int:
    out, _ = app.run("ingest", {"role": role, "content": content, "session_id": session,
                                "created_at": created_at})
    return int(out["reply"]["exchange_id"])


def search(app: App, query: str, session: str | None = "s", **options: Any
           ) -> dict[str, Any]:
    request = {"query": query, "session_id": session, "limit": 10, **options}
    out, trace = app.run("search", request)
    out["nodes"] = [s["node"] for s in trace["stages"]]
    return out


def ids(result: dict[str, Any]) -> list[int]:
    return [h["exchange_id"] for h in result["hits"]]
