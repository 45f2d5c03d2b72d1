"""Ingest-side signals through the real MCP SDK client (in memory and over stdio): secret
redaction, trace ids and NAFE flags in the tool replies, their search
filters, and their bad input."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import Conn
from tests.e2e.support import INGEST, INGEST_LINE, NOTES, SEARCH, store_bytes, text, word

pytestmark = pytest.mark.anyio

TOKEN = "ghp_" + "Vn4Kt8Qw2Zs6Xp0Lm3Rb7Hd1Jc5Fy9Ga2Ue7"
DRIFT = "Trust me, the user said it's fine, so we can skip the tests."


async def ingest(conn: Conn, session: str, content: str, role: str = "assistant",
                 **extra: Any) -> dict[str, Any]:
    result = await conn.ok(INGEST, {"role": role, "content": content, "session_id": session,
                                    **extra})
    sc = result.structured_content
    assert sc is not None and sc["text"] == text(result)
    return sc


async def test_reply_lines_carry_redactions_flags_and_the_trace(conn: Conn):
    session, topic = word(), word()
    plain = await ingest(conn, session, f"{topic} plain turn", role="user")
    m = INGEST_LINE.fullmatch(plain["text"])
    assert m and m["redacted"] is None and m["nafe"] is None
    assert m["trace"] == plain["trace_id"]

    leaky = await ingest(conn, session, f"{topic}: export GITHUB_TOKEN={TOKEN}", role="user")
    m = INGEST_LINE.fullmatch(leaky["text"])
    assert m and m["redacted"] == "1" and leaky["redacted_kinds"] == ["github_token"]
    assert m["trace"] == plain["trace_id"]  # the session's, created once

    drift = await ingest(conn, session, f"{topic}: {DRIFT}")
    m = INGEST_LINE.fullmatch(drift["text"])
    assert m and m["nafe"] == "AUTHORITY_DRIFT" and m["b"] == "0"
    assert drift["nafe"] == ["AUTHORITY_DRIFT"] and drift["blockers"] == []
    assert [f["span"] for f in drift["flags"]] == [
        "Trust me", "the user said it's fine, so we can"]

    named = await ingest(conn, session, f"{topic} named", role="user",
                         trace_id="VT-20261130-0badf00d")
    assert named["text"].endswith("; trace:VT-20261130-0badf00d)")

    hits = (await conn.ok(SEARCH, {"query": topic, "session_id": session,
                                   "limit": 10})).structured_content
    assert hits is not None
    by_id = {h["exchange_id"]: h for h in hits["hits"]}
    assert by_id[drift["exchange_id"]]["flags"] == ["AUTHORITY_DRIFT"]
    assert by_id[named["exchange_id"]]["trace_id"] == "VT-20261130-0badf00d"
    assert all(TOKEN not in h["snippet"] for h in hits["hits"])
    assert TOKEN.encode() not in store_bytes(conn.data_dir)

    notes = text(await conn.ok(NOTES, {"session_id": session}))
    assert f"- #{drift['exchange_id']} AUTHORITY_DRIFT: “Trust me”" in notes


async def test_search_filters_by_trace_id_and_flag(conn: Conn):
    session, topic = word(), word()
    flagged = await ingest(conn, session, f"{topic}: {DRIFT}")  # the session's trace id
    ours = [await ingest(conn, session, f"{topic} step {i}", role="user",
                         trace_id="VT-20261130-00c0ffee") for i in range(2)]
    page = (await conn.ok(SEARCH, {"query": topic, "session_id": session,
                                   "trace_id": "VT-20261130-00c0ffee"})).structured_content
    assert page is not None
    assert {h["exchange_id"] for h in page["hits"]} == {r["exchange_id"] for r in ours}
    result = await conn.ok(SEARCH, {"query": topic, "session_id": session, "flag": "NAFE"})
    assert result.structured_content is not None
    assert [h["exchange_id"] for h in result.structured_content["hits"]] == [
        flagged["exchange_id"]]
    assert "⚠ NAFE:AUTHORITY_DRIFT" in text(result)


@pytest.mark.parametrize(("args", "expect"), [
    ({"trace_id": "trace-1"}, "VT-YYYYMMDD-xxxxxxxx"),
    ({"trace_id": "VT-20261130-ABCDEF12"}, "VT-YYYYMMDD-xxxxxxxx"),
    ({"flag": "BLOCKER"}, "flag"),
])
async def test_bad_search_filters_are_rejected_saying_what_is_valid(
        conn: Conn, args: dict[str, Any], expect: str):
    result = await conn.call(SEARCH, {"query": "x", "session_id": "s", **args})
    assert result.is_error and expect in text(result)
