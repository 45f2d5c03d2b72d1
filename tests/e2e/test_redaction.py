"""Secret redaction of every free text that is stored, through the real MCP SDK client
(in memory, over stdio, and on a PostgreSQL store): a turn's content, a milestone's
label and a forget request's reason. What is asserted is what a user can see (the
replies, the running notes, search snippets) and, on SQLite, every byte of the store."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import Conn
from tests.e2e.support import (
    FORGET,
    INGEST,
    INGEST_LINE,
    MILESTONE,
    NOTES,
    SEARCH,
    store_bytes,
    text,
    word,
)

pytestmark = pytest.mark.anyio

AWS_EXAMPLE_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"  # from AWS's documentation
NPM_40 = "npm_" + "q7Rt2Vx9Kb4Mn8Pz3Lw6Hs1Jc5Fy0Ga2Ue7D8sA"
NPM_30 = "npm_" + "T3kq9Wm2Xz7Bv4Np8Lr1Yc6Hd0Fs5J"
PASSPHRASE = "maroon otter cobalt lantern"

# Each case: the turn as sent, the secret that must not be stored.
SHAPES = {
    "aws-secret-assigned": (f"export AWS_SECRET_ACCESS_KEY={AWS_EXAMPLE_SECRET}",
                            AWS_EXAMPLE_SECRET),
    "aws-secret-next-to-key-id": (f"new keys: AKIAZ7Q3K9X2M4P8R6T1 {AWS_EXAMPLE_SECRET}",
                                  AWS_EXAMPLE_SECRET),
    "npm-40": (f"the CI token is {NPM_40} (publish only)", NPM_40),
    "npm-30": (f"publish with {NPM_30} from the release vault", NPM_30),
    "password-passphrase": (f"db:\n  user: app\n  password: {PASSPHRASE}\n", PASSPHRASE),
}


def _stored_bytes(conn: Conn) -> bytes:
    """Every byte of a SQLite store (empty for a PostgreSQL one: its replies are checked)."""
    return store_bytes(conn.data_dir)


async def _ingest(conn: Conn, session: str, content: str) -> dict[str, Any]:
    result = await conn.ok(INGEST, {"role": "user", "content": content, "session_id": session})
    assert result.structured_content is not None
    return result.structured_content


@pytest.mark.parametrize("shape", list(SHAPES))
async def test_secret_shapes_are_redacted_at_ingest(conn: Conn, shape: str):
    session = word()
    content, secret = SHAPES[shape]
    reply = await _ingest(conn, session, f"{session} {content}")
    m = INGEST_LINE.fullmatch(reply["text"])
    assert m is not None and m["redacted"] is not None, reply["text"]
    notes = text(await conn.ok(NOTES, {"session_id": session}))
    assert "[REDACTED:" in notes and secret not in notes
    hits = (await conn.ok(SEARCH, {"query": session, "session_id": session})).structured_content
    assert hits is not None and hits["hits"]
    assert all(secret not in h["snippet"] for h in hits["hits"])
    assert secret.encode() not in _stored_bytes(conn)


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
