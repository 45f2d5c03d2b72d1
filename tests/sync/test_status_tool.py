"""stenographer_capture_status through the real MCP SDK client (in memory): the delivery
part shows each peer's outbox or inbox (pending, delivered, last error), and peers'
cursors never appear among the capture's files."""

from __future__ import annotations

from pathlib import Path

import pytest

from stenographer.sync import push
from tests.e2e.conftest import memory_conn
from tests.e2e.support import STATUS
from tests.sync.support import ingest, opened

pytestmark = pytest.mark.anyio

NOBODY = "http://127.0.0.1:9"  # the discard port: nothing listens


async def test_status_tool_reports_delivery_per_peer(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch):
    data = tmp_path / "data"
    with opened(data, sync_retries=0) as app:
        ingest(app, "s", ["first turn", "second turn", "third turn"])
        outcome = push(app, NOBODY)
    assert not outcome.ok and "could not be reached" in (outcome.error or "")

    async with memory_conn("auto", data, monkeypatch,
                           {"STENO_SYNC_PEER": "http://127.0.0.1:9/"}) as conn:
        result = await conn.ok(STATUS)
    assert result.structured_content is not None
    status = result.structured_content["status"]
    delivery, capture = status["delivery"], status["capture"]
    assert delivery["configured_peer"] == NOBODY
    (peer,) = delivery["peers"]
    assert (peer["direction"], peer["peer"], peer["position"]) == ("outbox", NOBODY, 0)
    assert (peer["pending"], peer["delivered"], peer["batches"]) == (3, 0, 0)
    assert "could not be reached" in peer["last_error"] and peer["last_error_at"].endswith("Z")
    assert delivery["pending"] == 3 and delivery["last_error"]["peer"] == NOBODY
    assert capture["files"] == 0 and capture["sources"] == [] and not capture["enabled"]
    text = result.content[0].text  # type: ignore[union-attr]
    assert f"delivery: to {NOBODY}: 0 delivered, 3 pending" in text
    assert "could not be reached" in text
