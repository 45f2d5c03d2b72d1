"""Crash safety: a real stdio server is killed with SIGKILL at a random moment during a
stream of pipelined ingests, 20 times over one store. After every kill, every turn whose
ingest was acknowledged is in the file with its content; the next server opens the store
(finishing a compression the kill interrupted) and the contract audit passes, which
also shows that no brief is partial and no turn is in two briefs."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import apsw
import pytest

from tests.e2e.support import AUDIT, INGEST, RawServer

pytestmark = pytest.mark.slow

KILLS = 20
BURST = 120  # ingests written at once; the server answers them one by one
TURN_LIMIT = "4"  # compressions run every few turns, so kills land inside some of them


def audit(server: RawServer, request_id: int) -> dict[str, Any]:
    reply = server.call_tool(request_id, AUDIT, {}, timeout=120.0)
    result = reply["result"]
    assert not result.get("isError"), result
    report: dict[str, Any] = result["structuredContent"]
    return report


def replies_until_eof(server: RawServer) -> list[dict[str, Any]]:
    """Every reply the killed server wrote in full (a line cut by the kill was never
    received by a client, so it acknowledges nothing)."""
    out, server.pending = server.pending, []
    while (line := server.lines.get(timeout=30)) is not None:
        try:
            out.append(json.loads(line))
        except ValueError:
            assert not line.endswith(b"\n"), line[:200]
    return out


def stored(path: Path) -> tuple[dict[int, str], bool]:
    """The stored turns, and whether a session holds a full uncompressed batch (the kill
    fell between an ingest and its compression)."""
    conn = apsw.Connection(str(path))
    try:
        turns = {int(i): str(c) for i, c in conn.execute("SELECT id, content FROM exchanges")}
        overdue = conn.execute(
            "SELECT count(*) FROM (SELECT session_id FROM exchanges WHERE brief_id IS NULL "
            "GROUP BY session_id HAVING count(*) >= ?)", (int(TURN_LIMIT),)).fetchone()[0]
        return turns, overdue > 0
    finally:
        conn.close()


def test_acknowledged_ingests_survive_sigkill_and_the_audit_passes(tmp_path: Path):
    rng = random.Random(20261130)
    acknowledged: dict[int, str] = {}  # exchange id -> content
    killed_mid_stream = interrupted_compressions = 0
    for round_ in range(KILLS + 1):
        server = RawServer(tmp_path, STENO_TURN_LIMIT=TURN_LIMIT)
        try:
            server.initialize()
            report = audit(server, 1)
            failed = [c for c in report["contracts"] if not c["passed"]]
            assert report["passed"], (round_, failed)
            if round_ == KILLS:
                break
            contents = {}
            for n in range(BURST):
                rid = 1_000 + n
                contents[rid] = f"round {round_} turn {n}: " + (
                    "Decision: keep the ledger." if rng.random() < 0.2 else "a plain note")
                server.send({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                             "params": {"name": INGEST, "arguments": {
                                 "role": "user", "content": contents[rid],
                                 "session_id": f"crash-{rng.randrange(3)}"}}})
            # The moment is set by the server's progress, not by the clock (a fast machine
            # would finish every burst first): after a random number of replies, plus a
            # random fraction of one ingest, so kills land between and inside calls.
            seen = 0
            target = rng.randrange(1, BURST)
            while seen < target:
                message = server.next_message(30.0)
                assert message is not None, f"round {round_}: no reply within 30 s"
                server.pending.append(message)
                seen += message.get("id") in contents
            time.sleep(rng.uniform(0.0, 0.004))
            server.proc.kill()  # SIGKILL: no clean-up of any kind
            server.proc.wait(timeout=10)
            answered = 0
            for message in replies_until_eof(server):
                result = message.get("result")
                if message.get("id") in contents and result and not result.get("isError"):
                    acknowledged[result["structuredContent"]["exchange_id"]] = (
                        contents[message["id"]])
                    answered += 1
            killed_mid_stream += answered < BURST
        finally:
            server.close()
        on_disk, overdue = stored(tmp_path / "steno.db")
        interrupted_compressions += overdue
        missing = {i: c for i, c in acknowledged.items() if on_disk.get(i) != c}
        assert not missing, f"round {round_}: acknowledged turns lost: {sorted(missing)}"
    assert len(acknowledged) > KILLS  # ingests were acknowledged along the way
    assert killed_mid_stream >= KILLS // 2, "the kills should interrupt the streams"
    print(f"\n{KILLS} SIGKILLs: {len(acknowledged)} acknowledged turns all present; "
          f"{killed_mid_stream} kills mid-stream; {interrupted_compressions} left a "
          "compression to finish; audit passed after every restart")
