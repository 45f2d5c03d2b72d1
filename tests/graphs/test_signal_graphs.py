"""Ingest-side signals on a real store file: secret redaction, trace ids
and NAFE reasoning-drift flags, through the compiled graphs."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graphs.registry import build_graphs
from graphs.runner import Graphs
from nodes.context import RunContext
from nodes.extract.patterns import compile_patterns
from nodes.extract.secrets import compile_extra
from stenographer.settings import Settings
from store.db import Store
from store.errors import InvalidInput

GITHUB = "ghp_" + "Qx7Lm2Vb9Tz4Rk8Wn3Jd6Hp1Fs5Yc0Ga2Ue7"
PASSWORD = "Zr8qLw2mXv5n"
LEAKY = (f"We decided to rotate {GITHUB} today. "
         f"DATABASE_URL=postgres://app:{PASSWORD}@db.internal:5432/app")
DRIFT = "Trust me, the user said it's fine, so we can skip the tests. They probably mean prod."
TRACE = re.compile(r"VT-\d{8}-[0-9a-f]{8}")


@pytest.fixture(scope="module")
def graphs() -> Graphs:
    return build_graphs()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    settings = Settings(data_dir=tmp_path)
    db = Store(settings.db_path, synchronous=settings.synchronous, vector_dim=settings.vector_dim)
    try:
        yield db
    finally:
        db.close()


def context(store: Store, tmp_path: Path, **settings: Any) -> RunContext:
    extra = settings.pop("secret_patterns", ())
    return RunContext(store=store, settings=Settings(data_dir=tmp_path, **settings),
                      patterns=compile_patterns(), secret_patterns=compile_extra(extra))


@pytest.fixture
def ctx(store: Store, tmp_path: Path) -> RunContext:
    return context(store, tmp_path)


def ingest(graphs: Graphs, ctx: RunContext, content: str, session: str = "s",
           role: str = "assistant", **extra: Any) -> dict[str, Any]:
    out, _ = graphs.run("ingest", {"request": {"role": role, "content": content,
                                               "session_id": session, **extra}}, ctx)
    reply: dict[str, Any] = out["reply"]
    return reply


def search(graphs: Graphs, ctx: RunContext, query: str, **extra: Any) -> dict[str, Any]:
    request = {"query": query, "session_id": "s", "limit": 50, "mode": "keyword", **extra}
    out, _ = graphs.run("search", {"request": request}, ctx)
    reply: dict[str, Any] = out["reply"]
    return reply


def db_bytes(store: Store) -> bytes:
    """Every byte of the store: the database file and its write-ahead log, with the stage
    traces of the runs flushed."""
    store.traces.flush()
    files = sorted(store.path.parent.glob("steno.db*"))
    assert store.path in files
    return b"".join(p.read_bytes() for p in files)


# --- secret redaction -----------------------------------------------------------------------

def test_secrets_are_redacted_before_anything_is_stored_indexed_or_hashed(
        graphs: Graphs, ctx: RunContext, store: Store):
    reply = ingest(graphs, ctx, LEAKY)
    assert reply["redacted"] == 2 and reply["redacted_kinds"] == ["github_token", "url_password"]
    assert "; redacted: 2;" in reply["text"]
    with store.read() as conn:
        content, digest, signals = conn.execute(
            "SELECT content, content_hash, signals FROM exchanges WHERE id = ?",
            (reply["exchange_id"],)).fetchone()
    assert content == ("We decided to rotate [REDACTED:github_token] today. DATABASE_URL="
                       "postgres://app:[REDACTED:url_password]@db.internal:5432/app")
    assert bytes(digest) == hashlib.sha256(content.encode()).digest()
    assert reply["decisions"] == ["We decided to rotate [REDACTED:github_token] today."]
    assert "[REDACTED:github_token]" in signals
    raw = db_bytes(store)
    for secret in (GITHUB, PASSWORD, GITHUB[4:20]):
        assert secret.encode() not in raw  # no page of the file holds it: text, index, trace
        assert search(graphs, ctx, secret)["hits"] == []
    assert [h["exchange_id"] for h in search(graphs, ctx, "rotate")["hits"]] == [
        reply["exchange_id"]]


def test_a_turn_without_secrets_is_stored_as_sent(graphs: Graphs, ctx: RunContext,
                                                  store: Store):
    reply = ingest(graphs, ctx, "password = getpass() and max_tokens=4096")
    assert reply["redacted"] == 0 and "redacted" not in reply["text"]
    with store.read() as conn:
        (content,) = conn.execute("SELECT content FROM exchanges").fetchone()
    assert content == "password = getpass() and max_tokens=4096"


def test_redaction_can_be_turned_off(graphs: Graphs, store: Store, tmp_path: Path):
    reply = ingest(graphs, context(store, tmp_path, redact_secrets=False), LEAKY)
    assert reply["redacted"] == 0
    with store.read() as conn:
        (content,) = conn.execute("SELECT content FROM exchanges").fetchone()
    assert content == LEAKY
    assert GITHUB.encode() in db_bytes(store)  # the file scan above would have seen it


def test_extra_secret_patterns_from_settings(graphs: Graphs, store: Store, tmp_path: Path):
    ctx = context(store, tmp_path, secret_patterns=(r"acme_[0-9a-f]{16}",))
    reply = ingest(graphs, ctx, "the acme key is acme_0123456789abcdef")
    assert reply["redacted_kinds"] == ["custom"]
    assert b"acme_0123456789abcdef" not in db_bytes(store)


# --- trace ids ------------------------------------------------------------------------------

def test_a_session_gets_one_trace_id_and_a_named_one_wins(graphs: Graphs, ctx: RunContext):
    first = ingest(graphs, ctx, "one", role="user")
    assert TRACE.fullmatch(first["trace_id"])
    assert first["text"].endswith(f"; trace:{first['trace_id']})")
    second = ingest(graphs, ctx, "two", role="user")
    assert second["trace_id"] == first["trace_id"]
    named = ingest(graphs, ctx, "three", role="user", trace_id="VT-20261130-0a1b2c3d")
    assert named["trace_id"] == "VT-20261130-0a1b2c3d"
    assert ingest(graphs, ctx, "four", role="user")["trace_id"] == first["trace_id"]
    other = ingest(graphs, ctx, "five", session="other", role="user")
    assert TRACE.fullmatch(other["trace_id"]) and other["trace_id"] != first["trace_id"]


def test_the_first_named_trace_id_becomes_the_sessions(graphs: Graphs, ctx: RunContext):
    ingest(graphs, ctx, "one", session="n", trace_id="VT-20250101-deadbeef")
    assert ingest(graphs, ctx, "two", session="n")["trace_id"] == "VT-20250101-deadbeef"


def test_a_generated_trace_id_is_dated_by_the_sessions_first_turn(graphs: Graphs,
                                                                  ctx: RunContext):
    reply = ingest(graphs, ctx, "old", session="d", created_at="2024-02-29T23:59:00Z")
    assert reply["trace_id"].startswith("VT-20240229-")


def test_a_repeated_source_key_answers_with_the_stored_trace(graphs: Graphs, ctx: RunContext):
    first = ingest(graphs, ctx, "x", source_key="k1", trace_id="VT-20261130-00000001")
    again = ingest(graphs, ctx, "x", source_key="k1")
    assert again["duplicate"] and again["trace_id"] == first["trace_id"]


def test_a_session_recorded_before_trace_ids_gets_one(graphs: Graphs, ctx: RunContext,
                                                      store: Store):
    first = ingest(graphs, ctx, "legacy", session="L")
    with store.write() as conn:
        conn.execute("UPDATE sessions SET trace_id = NULL WHERE name = 'L'")
    second = ingest(graphs, ctx, "after the migration", session="L")
    third = ingest(graphs, ctx, "and again", session="L")
    assert TRACE.fullmatch(second["trace_id"]) and third["trace_id"] == second["trace_id"]
    assert second["trace_id"] != first["trace_id"]


def test_search_filters_by_trace_id_and_hits_carry_it(graphs: Graphs, ctx: RunContext):
    b = [ingest(graphs, ctx, f"ledger entry {i} again") for i in range(2)]  # session's trace
    a = [ingest(graphs, ctx, f"ledger entry {i}", trace_id="VT-20261130-aaaaaaaa")
         for i in range(3)]
    for mode in ("keyword", "semantic", "hybrid"):
        out = search(graphs, ctx, "ledger entry", mode=mode, trace_id="VT-20261130-aaaaaaaa")
        assert {h["exchange_id"] for h in out["hits"]} == {r["exchange_id"] for r in a}
        assert {h["trace_id"] for h in out["hits"]} == {"VT-20261130-aaaaaaaa"}
        assert "trace:VT-20261130-aaaaaaaa" in out["text"]
    session_trace = b[0]["trace_id"]
    out = search(graphs, ctx, "ledger", trace_id=session_trace)
    assert {h["exchange_id"] for h in out["hits"]} == {r["exchange_id"] for r in b}
    assert search(graphs, ctx, "ledger", trace_id="VT-20000101-00000000")["hits"] == []


@pytest.mark.parametrize("bad", ["trace-1", "VT-2026113-1a2b3c4d", "VT-20261130-1A2B3C4D",
                                 "VT-20261130-1a2b3c4d5", 42])
def test_a_malformed_trace_filter_is_rejected_with_the_form(graphs: Graphs, ctx: RunContext,
                                                            bad: Any):
    with pytest.raises(InvalidInput, match=r"VT-YYYYMMDD-xxxxxxxx"):
        search(graphs, ctx, "ledger", trace_id=bad)


# --- NAFE flags -----------------------------------------------------------------------------

def test_assistant_turns_get_flags_with_spans_that_are_never_blockers(
        graphs: Graphs, ctx: RunContext, store: Store):
    reply = ingest(graphs, ctx, DRIFT)
    assert reply["nafe"] == ["AUTHORITY_DRIFT", "INTENT_INFERENCE"]
    assert reply["blockers"] == []
    assert re.search(r"; blockers: 0; ⚠ NAFE:AUTHORITY_DRIFT,INTENT_INFERENCE; trace:VT-",
                     reply["text"])
    with store.read() as conn:
        rows = conn.execute("SELECT signature, span, span_start, span_end FROM signal_flags "
                            "WHERE exchange_id = ? ORDER BY span_start",
                            (reply["exchange_id"],)).fetchall()
    assert [(sig, span) for sig, span, _, _ in rows] == [
        ("AUTHORITY_DRIFT", "Trust me"),
        ("AUTHORITY_DRIFT", "the user said it's fine, so we can"),
        ("INTENT_INFERENCE", "They probably mean")]
    for _, span, start, end in rows:
        assert DRIFT[start:end] == span


def test_user_turns_are_not_scanned(graphs: Graphs, ctx: RunContext):
    reply = ingest(graphs, ctx, DRIFT, role="user")
    assert reply["nafe"] == [] and "NAFE" not in reply["text"]


def test_flags_are_listed_in_the_running_notes(graphs: Graphs, ctx: RunContext):
    flagged = ingest(graphs, ctx, DRIFT)
    ingest(graphs, ctx, "A plain turn about the parser.")
    out, _ = graphs.run("notes", {"request": {"session_id": "s"}}, ctx)
    md = out["reply"]["markdown"]
    assert "## Reasoning-drift flags (NAFE, heuristic — not blockers)" in md
    assert f"- #{flagged['exchange_id']} AUTHORITY_DRIFT: “Trust me”" in md
    assert f"- #{flagged['exchange_id']} INTENT_INFERENCE: “They probably mean”" in md
    assert md.index("## Milestones") < md.index("## Reasoning-drift") < md.index(
        "## Compressed briefs")
    out, _ = graphs.run("notes", {"request": {"session_id": "quiet"}}, ctx)
    assert "Reasoning-drift" not in out["reply"]["markdown"]


def test_flagged_turns_are_searchable_by_flag(graphs: Graphs, ctx: RunContext):
    flagged = ingest(graphs, ctx, "The deploy plan: " + DRIFT)
    rescue = ingest(graphs, ctx, "The deploy plan: in the spirit of the rule we skip the gate.")
    ingest(graphs, ctx, "The deploy plan is on the wiki.")
    everything = search(graphs, ctx, "deploy plan")
    assert len(everything["hits"]) == 3
    any_flag = search(graphs, ctx, "deploy plan", flag="NAFE")
    assert {h["exchange_id"] for h in any_flag["hits"]} == {flagged["exchange_id"],
                                                            rescue["exchange_id"]}
    hits = {h["exchange_id"]: h["flags"] for h in any_flag["hits"]}
    assert hits[flagged["exchange_id"]] == ["AUTHORITY_DRIFT", "INTENT_INFERENCE"]
    assert hits[rescue["exchange_id"]] == ["NARRATIVE_RESCUE"]
    assert "⚠ NAFE:AUTHORITY_DRIFT,INTENT_INFERENCE" in any_flag["text"]
    for mode in ("keyword", "semantic", "hybrid"):
        one = search(graphs, ctx, "deploy plan", flag="NARRATIVE_RESCUE", mode=mode)
        assert [h["exchange_id"] for h in one["hits"]] == [rescue["exchange_id"]]
    with pytest.raises(InvalidInput, match="flag='BLOCKER' is not valid; valid: NAFE"):
        search(graphs, ctx, "deploy plan", flag="BLOCKER")


def test_flags_leave_with_their_turn(graphs: Graphs, ctx: RunContext, store: Store):
    reply = ingest(graphs, ctx, DRIFT)
    with store.write() as conn:
        conn.execute("DELETE FROM exchanges_fts WHERE rowid = ?", (reply["exchange_id"],))
        conn.execute("DELETE FROM exchange_vectors WHERE rowid = ?", (reply["exchange_id"],))
        conn.execute("DELETE FROM exchanges WHERE id = ?", (reply["exchange_id"],))
        (left,) = conn.execute("SELECT count(*) FROM signal_flags").fetchone()
    assert left == 0
