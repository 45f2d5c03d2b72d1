"""Secret redaction of every free text that is stored, through the real MCP SDK client
(in memory, over stdio, and on a PostgreSQL store): a turn's content, a milestone's
label and a forget request's reason. What is asserted is what a user can see (the
replies, the running notes, search snippets) and, on SQLite, every byte of the store."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import Conn
from tests.e2e.support import FORGET, INGEST, MILESTONE, NOTES, text, word

pytestmark = pytest.mark.anyio

def _stored_bytes(conn: Conn) -> bytes:
    """Every byte of a SQLite store (empty for a PostgreSQL one: its replies are checked)."""
    return b"".join(p.read_bytes() for p in sorted(conn.data_dir.glob("steno.db*")))


async def _ingest(conn: Conn, session: str, content: str) -> dict[str, Any]:
    result = await conn.ok(INGEST, {"role": "user", "content": content, "session_id": session})
    assert result.structured_content is not None
    return result.structured_content


async def test_milestone_labels_are_redacted_before_they_are_stored(conn: Conn):
    session = word()
    turn = await _ingest(conn, session, f"{session}: rotated the deploy credentials")
    token = "ghp_" + "Wm4Tq8Zr2Xv6Nb0Kp3Ls7Hd1Jc5Fy9Ga2Ue7"
    label = f"rotated deploy token, new one is {token}"
    result = await conn.ok(MILESTONE, {"session_id": session,
                                       "exchange_id": turn["exchange_id"], "label": label})
    sc = result.structured_content
    assert sc is not None
    assert sc["label"] == "rotated deploy token, new one is [REDACTED:github_token]"
    assert token not in text(result)
    notes = text(await conn.ok(NOTES, {"session_id": session}))
    assert "[REDACTED:github_token]" in notes and token not in notes
    assert token.encode() not in _stored_bytes(conn)


async def test_a_forget_reason_is_redacted_before_the_tombstone_is_written(conn: Conn):
    session = word()
    await _ingest(conn, session, f"{session}: a turn to forget")
    password = "Xk29fLq8vB2#rT"
    result = await conn.ok(FORGET, {"session_id": session, "confirm": True,
                                    "reason": f"pasted DB_PASSWORD={password} by mistake"})
    assert result.structured_content is not None and result.structured_content["count"] == 1
    assert password not in text(result)
    assert password.encode() not in _stored_bytes(conn)
