"""stenographer_graph_query through the real MCP client (in memory and over stdio): the
operator's batch run builds the graph from turns the tool recorded; the tool answers
with entities, relations and supporting turns, session-scoped or across sessions, and
rejects bad input with a message that says what is valid."""

from __future__ import annotations

import pytest

from stenographer.app import open_app
from stenographer.settings import Settings
from tests.e2e.conftest import Conn
from tests.e2e.support import GRAPH_QUERY, INGEST, assert_trace, text, word

pytestmark = pytest.mark.anyio


async def _record(conn: Conn, session: str, contents: list[str]) -> list[int]:
    ids = []
    for content in contents:
        result = await conn.ok(INGEST, {"role": "user", "content": content,
                                        "session_id": session})
        ids.append(result.structured_content["exchange_id"])  # type: ignore[index]
    return ids


def _extract(conn: Conn) -> None:
    """`stenographer graphrag extract`, as the operator runs it next to the server."""
    app = open_app(Settings(data_dir=conn.data_dir, turn_limit=1_000,
                            database_url=conn.database_url))
    try:
        while app.run("graphrag_batch", {})[0]["published"]["remaining"]:
            pass
        app.run("graphrag_communities", {})
    finally:
        app.close()


async def test_graph_query_cites_the_turns_behind_entities_and_relations(shared_conn: Conn):
    session, thing = word(), word()
    ids = await _record(shared_conn, session, [
        f"Ana: The {thing} service is blocked by ABC-77.",
        "Bo: ABC-77 comes from the payments gateway timeout.",
        "Ana: Lunch at noon?"])
    _extract(shared_conn)
    result = await shared_conn.ok(GRAPH_QUERY, {"query": f"what blocks the {thing} service?",
                                                "session_id": session})
    data = result.structured_content
    assert data is not None
    assert data["entities"][0]["key"] == f"{thing} service"
    assert "ABC-77" in [e["label"] for e in data["entities"]]
    blocks = [r for r in data["relations"] if r["kind"] == "blocks"]
    assert blocks and blocks[0]["turn_ids"] == [ids[0]]
    turns = [t["exchange_id"] for t in data["turns"]]
    assert turns[:2] == [ids[0], ids[1]]  # the chat after them ranks below, if at all
    assert all(t["session_id"] == session for t in data["turns"])
    assert f"#{ids[0]}" in text(result)
    assert assert_trace(data["trace"], "graph_query") == [
        "validate", "seeds", "neighbourhood", "rank", "support", "reply"]
    other = await shared_conn.ok(GRAPH_QUERY, {"query": f"{thing} service",
                                               "session_id": word()})
    assert other.structured_content["entities"] == []  # type: ignore[index]


async def test_graph_query_rejects_bad_input(shared_conn: Conn):
    for arguments, message in (({"query": "x"}, "session_id is required"),
                               ({"query": "x", "cross_session": True, "hops": 4}, "hops"),
                               ({"query": "", "cross_session": True}, "query")):
        result = await shared_conn.call(GRAPH_QUERY, arguments)
        assert result.is_error and message in text(result), text(result)
