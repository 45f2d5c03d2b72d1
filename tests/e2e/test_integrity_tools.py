"""stenographer_audit and stenographer_forget through the real MCP client (in memory,
both handshakes): a clean audit, a tampered store named by the tool, forgetting that
requires confirmation and then leaves the audit green and the file without the text."""

from __future__ import annotations

import apsw
import pytest

from tests.e2e.conftest import Conn
from tests.e2e.support import AUDIT, FORGET, INGEST, SEARCH, assert_trace, text

pytestmark = pytest.mark.anyio

SERVER_ENV = {"STENO_TURN_LIMIT": "3"}
SECRET = "Quartermain-Zebulon-7731"  # not a credential shape: redaction would have caught one


async def ingest(conn: Conn, session: str, content: str) -> int:
    result = await conn.ok(INGEST, {"role": "user", "content": content,
                                    "session_id": session})
    assert result.structured_content is not None
    return int(result.structured_content["exchange_id"])


async def test_audit_tool_reports_every_contract_and_names_tampering(memory: Conn):
    ids = [await ingest(memory, "s", f"note {i}") for i in range(5)]
    result = await memory.ok(AUDIT)
    report = result.structured_content
    assert report is not None and report["passed"] is True
    assert [c["name"] for c in report["contracts"]][:2] == ["turn_hashes", "hash_chain"]
    assert text(result).startswith("Audit of the whole store: all 11 contracts hold")
    assert_trace(report["trace"], "contract_audit")

    raw = apsw.Connection(str(memory.db_path))
    raw.execute("UPDATE exchanges SET content = 'rewritten' WHERE id = ?", (ids[3],))
    raw.close()
    report = (await memory.ok(AUDIT, {"session_id": "s"})).structured_content
    assert report is not None and report["passed"] is False
    failed = {c["name"]: c["ids"] for c in report["contracts"] if not c["passed"]}
    assert failed == {"turn_hashes": [ids[3]]}

    missing = await memory.call(AUDIT, {"session_id": "nope"})
    assert missing.is_error and "not in the store" in text(missing)


async def test_forget_tool_requires_confirm_then_forgets_for_good(memory: Conn):
    for i in range(4):
        await ingest(memory, "s", f"token {SECRET} pasted" if i == 1 else f"plain {i}")
    refused = await memory.call(FORGET, {"text": SECRET})
    assert refused.is_error and "confirm=true" in text(refused)
    assert SECRET not in text(refused)
    assert (await memory.counts())["exchanges"] == 4

    result = await memory.ok(FORGET, {"text": SECRET, "confirm": True, "reason": "leak"})
    reply = result.structured_content
    assert reply is not None and reply["count"] == 1 and reply["briefs_rebuilt"] == [1]
    assert SECRET not in text(result)
    assert_trace(reply["trace"], "forget")
    data = memory.db_path.read_bytes()
    wal = memory.db_path.with_name("steno.db-wal")
    data += wal.read_bytes() if wal.exists() else b""
    assert SECRET.encode() not in data
    hits = (await memory.ok(SEARCH, {"query": SECRET, "session_id": "s",
                                     "mode": "keyword"})).structured_content
    assert hits is not None and hits["hits"] == []
    assert (await memory.ok(AUDIT)).structured_content["passed"] is True  # type: ignore[index]
    again = await memory.ok(FORGET, {"text": SECRET, "confirm": True})
    assert text(again).startswith("Nothing forgotten")
