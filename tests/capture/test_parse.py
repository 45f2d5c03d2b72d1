"""Transcript records → turns, for both hosts' formats (nodes.extract.transcripts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodes.extract.transcripts import (
    CLAUDE_CODE,
    CODEX,
    CorruptRecord,
    parse_record,
    session_from_name,
)
from tests.capture.transcripts import CODEX_SESSION, ClaudeTranscript, CodexTranscript


def lines(text: str) -> list[bytes]:
    return [raw.encode() for raw in text.splitlines()]


def turns(kind: str, text: str, session: str | None = None) -> list[dict[str, object]]:
    out = []
    for raw in lines(text):
        parsed = parse_record(kind, raw, session)
        session = parsed.session or session
        if parsed.turn is not None:
            out.append(parsed.turn)
    return out


def test_claude_code_user_and_assistant_text_are_turns_and_nothing_else(tmp_path: Path):
    t = ClaudeTranscript(tmp_path)
    text = t.user("Kafka or Redis streams?") + t.noise() + t.assistant("We went with Redis.")
    got = turns(CLAUDE_CODE, text)
    assert [(g["role"], g["content"]) for g in got] == t.said
    first = json.loads(text.splitlines()[0])
    assert got[0]["session_id"] == f"claude-code:{t.session}"
    assert got[0]["source_key"] == f"claude-code:{first['uuid']}"
    assert got[0]["created_at"] == first["timestamp"]


def test_claude_code_text_blocks_are_joined_and_other_blocks_dropped():
    rec = {"type": "assistant", "uuid": "u", "sessionId": "s", "timestamp": "2026-11-30T10:00:00Z",
           "message": {"role": "assistant", "content": [
               {"type": "text", "text": "First."}, {"type": "tool_use", "id": "t", "name": "x",
                                                     "input": {}},
               {"type": "text", "text": "Second."}]}}
    parsed = parse_record(CLAUDE_CODE, json.dumps(rec).encode())
    assert parsed.turn is not None and parsed.turn["content"] == "First.\n\nSecond."


@pytest.mark.parametrize("flag", ["isSidechain", "isMeta", "isCompactSummary"])
def test_claude_code_side_chains_meta_and_compaction_summaries_are_not_turns(flag: str):
    rec = {"type": "user", "uuid": "u", "sessionId": "s", flag: True,
           "message": {"role": "user", "content": "text"}}
    assert parse_record(CLAUDE_CODE, json.dumps(rec).encode()).turn is None


def test_codex_messages_are_turns_context_blocks_and_events_are_not(tmp_path: Path):
    t = CodexTranscript(tmp_path)
    text = t.meta() + t.user("Why is the build failing?") + t.noise() + t.assistant(
        "Blocked: the linker cannot find libssl.")
    got = turns(CODEX, text)
    assert [(g["role"], g["content"]) for g in got] == t.said
    assert {g["session_id"] for g in got} == {f"codex:{CODEX_SESSION}"}
    assert all(str(g["source_key"]).startswith("codex:") for g in got)


def test_codex_source_keys_depend_on_the_record_not_its_place(tmp_path: Path):
    t = CodexTranscript(tmp_path)
    record = lines(t.user("same words"))[0]
    again = parse_record(CODEX, record, CODEX_SESSION).turn
    first = parse_record(CODEX, record, CODEX_SESSION).turn
    assert first is not None and again is not None
    assert first["source_key"] == again["source_key"]
    copied = parse_record(CODEX, record, "a-resumed-session", offset=4096).turn
    assert copied is not None and copied["source_key"] == first["source_key"]
    assert copied["session_id"] == "codex:a-resumed-session"


def test_older_codex_records_without_a_time_are_told_apart_by_their_offset():
    raw = b'{"type": "message", "role": "user", "content": [{"type": "input_text", ' \
          b'"text": "yes"}]}'
    first = parse_record(CODEX, raw, "s", offset=100).turn
    second = parse_record(CODEX, raw, "s", offset=200).turn
    assert first is not None and second is not None
    assert first["source_key"] != second["source_key"]


def test_codex_older_files_without_the_envelope():
    meta = {"id": CODEX_SESSION, "timestamp": "2025-05-01T10:00:00Z", "instructions": ""}
    msg = {"type": "message", "role": "assistant",
           "content": [{"type": "output_text", "text": "Done."}]}
    state = {"record_type": "state"}
    text = "\n".join(json.dumps(r) for r in (meta, state, msg))
    got = turns(CODEX, text)
    assert [(g["role"], g["content"], g["session_id"]) for g in got] == [
        ("assistant", "Done.", f"codex:{CODEX_SESSION}")]


def test_codex_session_from_the_file_name():
    assert session_from_name(CODEX, f"rollout-2026-11-30T10-00-00-{CODEX_SESSION}.jsonl") \
        == CODEX_SESSION
    assert session_from_name(CODEX, "notes.jsonl") is None


@pytest.mark.parametrize(("kind", "raw", "reason"), [
    (CLAUDE_CODE, b"{not json", "not JSON"),
    (CLAUDE_CODE, b"\xff\xfe{}", "not UTF-8"),
    (CLAUDE_CODE, b"[1, 2]", "not a record object"),
    (CLAUDE_CODE, b'{"type": "user", "sessionId": "s", "message": "hi"}', "message object"),
    (CLAUDE_CODE, b'{"type": "user", "message": {"content": "hi"}}', "sessionId"),
    (CLAUDE_CODE, b'{"type": "user", "sessionId": "s", "message": {"content": 7}}',
     "not text or a list"),
    (CODEX, b'{"type": "response_item", "payload": "x"}', "payload object"),
    (CODEX, b'{"type": "session_meta", "payload": {}}', "session id"),
    (CODEX, b'{"type": "response_item", "payload": {"type": "message", "role": "user", '
            b'"content": [{"type": "input_text"}]}}', "has no text"),
])
def test_corrupt_records_say_what_is_wrong(kind: str, raw: bytes, reason: str):
    with pytest.raises(CorruptRecord, match=reason):
        parse_record(kind, raw, "s")


def test_a_codex_message_without_any_session_is_corrupt():
    raw = b'{"type": "response_item", "payload": {"type": "message", "role": "user", ' \
          b'"content": [{"type": "input_text", "text": "hi"}]}}'
    with pytest.raises(CorruptRecord, match="session"):
        parse_record(CODEX, raw, None)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                max_size=4),
    max_leaves=12)
_fields = st.fixed_dictionaries({}, optional={
    "type": st.sampled_from(["user", "assistant", "response_item", "session_meta",
                             "message", "summary"]) | st.text(max_size=5),
    "message": _json, "payload": _json, "content": _json, "role": _json, "sessionId": _json,
    "uuid": _json, "timestamp": _json, "id": _json, "isMeta": _json})


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from([CLAUDE_CODE, CODEX]), raw=st.binary(max_size=200),
       session=st.none() | st.text(max_size=10))
def test_any_bytes_parse_or_are_reported_corrupt(kind: str, raw: bytes, session: str | None):
    try:
        parse_record(kind, raw, session)
    except CorruptRecord:
        pass


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from([CLAUDE_CODE, CODEX]), record=_fields)
def test_any_record_shape_parses_or_is_reported_corrupt(kind: str, record: dict[str, object]):
    try:
        parsed = parse_record(kind, json.dumps(record).encode(), "s")
    except CorruptRecord:
        return
    if parsed.turn is not None:
        assert parsed.turn["role"] in ("user", "assistant")
        assert isinstance(parsed.turn["content"], str) and parsed.turn["content"].strip()
        assert str(parsed.turn["source_key"]).startswith(f"{kind}:")
