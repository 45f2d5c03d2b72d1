"""Bad input: every tool answers every input. Invalid input gets an isError
result that says what was wrong; nothing is stored and nothing stored is touched
(checked with a digest of every stored row); the server keeps serving afterwards.
Malformed JSON-RPC, invalid UTF-8 and lone surrogates are sent over raw stdio.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from nodes.extract.query_terms import uses_fts_syntax
from tests.e2e.conftest import Conn
from tests.e2e.support import (
    FORGET,
    GUARD,
    INGEST,
    INGEST_LINE,
    MILESTONE,
    NOTES,
    SEARCH,
    STATUS,
    RawServer,
    db_counts,
    db_digest,
    text,
)

pytestmark = pytest.mark.anyio

MAX_CONTENT = 1_000
SERVER_ENV = {"STENO_MAX_CONTENT_CHARS": str(MAX_CONTENT)}  # read by the e2e fixtures

S1, S2 = "bad-input-main", "bad-input-other"
LEDGER = "ledger"  # a word in every seeded turn of S1
NO_WORD = "no turn searched matches a word of the query"  # the note when nothing matched


@dataclass(frozen=True)
class Seed:
    s1_ids: list[int]
    s2_ids: list[int]


_SEEDED: dict[str, Seed] = {}  # by store file


async def seed(conn: Conn) -> Seed:
    """Nine turns in S1 (one brief, one live turn, a milestone) and one in S2.

    Idempotent through source keys; a store shared by several tests is seeded once.
    """
    if str(conn.db_path) in _SEEDED:
        return _SEEDED[str(conn.db_path)]
    s1 = []
    for i in range(9):
        r = await conn.ok(INGEST, {"role": "user" if i % 2 else "assistant",
                                   "content": f"{LEDGER} entry {i}: we decided to keep going",
                                   "session_id": S1, "source_key": f"seed:s1:{i}"})
        s1.append(r.structured_content["exchange_id"])  # type: ignore[index]
    r = await conn.ok(INGEST, {"role": "user", "content": "the other session",
                               "session_id": S2, "source_key": "seed:s2:0"})
    await conn.ok(MILESTONE, {"session_id": S1, "exchange_id": s1[3], "label": "seeded"})
    s2 = [r.structured_content["exchange_id"]]  # type: ignore[index]
    seeded = _SEEDED[str(conn.db_path)] = Seed(s1, s2)
    return seeded


async def assert_still_serving(conn: Conn, seeded: Seed) -> None:
    hits = (await conn.ok(SEARCH, {"query": LEDGER, "session_id": S1, "mode": "keyword",
                                   "limit": 50})).structured_content["hits"]  # type: ignore[index]
    assert sorted(h["exchange_id"] for h in hits) == seeded.s1_ids


Args = Callable[[Seed], dict[str, Any]]


def case(tool: str, args: Args | dict[str, Any], *expect: str, id: str) -> Any:
    factory = args if callable(args) else (lambda _s, a=args: a)
    return pytest.param(tool, factory, expect, id=id)


def turn(**overrides: Any) -> dict[str, Any]:
    return {"role": "user", "content": "fine", "session_id": S1, **overrides}


def query(**overrides: Any) -> dict[str, Any]:
    return {"query": LEDGER, "session_id": S1, **overrides}


REJECTED = [
    case(INGEST, {"content": "x", "session_id": S1}, "role", "Field required",
         id="missing-role"),
    case(INGEST, turn(role="boss"), "role", "'user', 'assistant', 'system' or 'tool'",
         id="unknown-role"),
    case(INGEST, turn(content=""), "content", "at least 1 character", id="empty-content"),
    case(INGEST, turn(content=" \n\t\u3000 "), "content must not be empty or only white space",
         id="whitespace-content"),
    case(INGEST, turn(content="x" * (MAX_CONTENT + 1)),
         f"content is {MAX_CONTENT + 1:,} characters; at most {MAX_CONTENT:,} allowed",
         id="content-over-limit"),
    case(INGEST, turn(content=None), "content", id="null-content"),
    case(INGEST, turn(session_id=""), "session_id", "at least 1 character",
         id="empty-session"),
    case(INGEST, turn(session_id="a\nb"), "session_id must not contain control characters",
         id="session-with-newline"),
    case(INGEST, turn(session_id="s" * 201), "session_id", "at most 200 characters",
         id="session-too-long"),
    case(INGEST, turn(trace_id="trace-1"), "trace_id=", "VT-YYYYMMDD-xxxxxxxx",
         id="bad-trace-id"),
    case(INGEST, turn(created_at="last tuesday"), "created_at=", "ISO 8601",
         id="bad-created-at"),
    case(INGEST, turn(created_at="1969-07-20T20:17:00Z"), "on or after 1970-01-01",
         id="created-before-1970"),
    case(MILESTONE, lambda s: {"session_id": S2, "exchange_id": s.s1_ids[0], "label": "x"},
         "belongs to another session", id="milestone-other-session"),
    case(MILESTONE, {"session_id": S1, "exchange_id": 10**12, "label": "x"},
         "exchange #1000000000000 does not exist", id="milestone-nonexistent-id"),
    case(MILESTONE, {"session_id": S1, "exchange_id": 2**70, "label": "x"},
         "exchange_id", "less than or equal to 9223372036854775807",
         id="milestone-id-beyond-64-bits"),
    case(MILESTONE, {"session_id": S1, "exchange_id": 0, "label": "x"}, "exchange_id",
         id="milestone-id-zero"),
    case(MILESTONE, lambda s: {"session_id": "nobody", "exchange_id": s.s1_ids[0],
                               "label": "x"}, "no session 'nobody'",
         id="milestone-unknown-session"),
    case(MILESTONE, lambda s: {"session_id": S1, "exchange_id": s.s1_ids[0], "label": ""},
         "label", id="milestone-empty-label"),
    case(SEARCH, query(limit=0), "limit", "greater than or equal to 1", id="limit-0"),
    case(SEARCH, query(limit=51), "limit", "less than or equal to 50", id="limit-51"),
    case(SEARCH, query(limit=-1), "limit", "greater than or equal to 1", id="limit-negative"),
    case(SEARCH, query(limit="ten"), "limit", id="limit-not-a-number"),
    case(SEARCH, query(query=""), "query", "at least 1 character", id="empty-query"),
    case(SEARCH, query(mode="fuzzy"), "mode", id="unknown-mode"),
    case(SEARCH, query(role="boss"), "role", id="unknown-search-role"),
    case(SEARCH, {"query": LEDGER}, "session_id is required unless cross_session=true",
         id="search-without-session"),
    case(SEARCH, query(cursor="not-a-cursor"), "cursor is not valid", id="bad-cursor"),
    case(SEARCH, query(cursor="e30"), "cursor is not valid", id="empty-json-cursor"),
    case(SEARCH, query(since="yesterday"), "since=", "is not an ISO 8601", id="bad-since"),
    case(SEARCH, query(until="2025-13-45"), "until=", "is not an ISO 8601", id="bad-until"),
    case(SEARCH, query(since="2025-05-01", until="2025-04-01"),
         "since must be earlier than until", id="since-after-until"),
    case(GUARD, {"session_id": S1, "top_k": 0}, "top_k", "greater than or equal to 1",
         id="top-k-0"),
    case(GUARD, {"session_id": S1, "top_k": 51}, "top_k", id="top-k-51"),
    case(NOTES, {"session_id": S1, "max_chars": 100}, "max_chars", "greater than or equal",
         id="max-chars-too-small"),
    case(NOTES, {}, "session_id", "Field required", id="notes-without-session"),
    case("stenographer_no_such_tool", {}, "stenographer_no_such_tool", id="unknown-tool"),
]


@pytest.mark.parametrize(("tool", "args", "expect"), REJECTED)
async def test_invalid_input_is_rejected_and_changes_nothing(
        shared_conn: Conn, tool: str, args: Args, expect: tuple[str, ...]):
    conn = shared_conn
    seeded = await seed(conn)
    before, counts = db_digest(conn.db_path), db_counts(conn.db_path)

    result = await conn.call(tool, args(seeded))

    assert result.is_error, text(result)
    message = text(result)
    for part in expect:
        assert part in message, message
    assert db_digest(conn.db_path) == before
    assert db_counts(conn.db_path) == counts
    await assert_still_serving(conn, seeded)


ARGUMENT_ERRORS = [
    pytest.param(NOTES, {}, {"session_id": ("Field required", "1-200 characters")},
                 id="missing-field"),
    pytest.param(INGEST, {"role": "boss", "content": "", "session_id": S1},
                 {"role": ("'user', 'assistant', 'system' or 'tool'",),
                  "content": ("at least 1 character", "The turn's full text")},
                 id="two-fields"),
    pytest.param(SEARCH, query(limit=0, mode="fuzzy", cross_session="maybe"),
                 {"limit": ("greater than or equal to 1", "integer from 1 to 50"),
                  "mode": ("'hybrid', 'keyword' or 'semantic'",),
                  "cross_session": ("valid boolean", "true or false")},
                 id="three-fields"),
    pytest.param(MILESTONE, {"session_id": S1, "exchange_id": "seven", "label": "x"},
                 {"exchange_id": ("valid integer", "The #id of a turn")},
                 id="not-an-integer"),
    pytest.param(FORGET, {"exchange_ids": [1, "two", 3]},
                 {"exchange_ids": ("item 1", "valid integer", "list of integers")},
                 id="list-item"),
    pytest.param(GUARD, {"session_id": S1, "top_k": None, "query": 7},
                 {"query": ("valid string", "at most 2000 characters")},
                 id="wrong-type"),
]


@pytest.mark.parametrize(("tool", "args", "fields"), ARGUMENT_ERRORS)
async def test_argument_errors_say_per_field_what_is_valid(
        shared_conn: Conn, tool: str, args: dict[str, Any],
        fields: dict[str, tuple[str, ...]]):
    conn = shared_conn
    seeded = await seed(conn)
    before = db_digest(conn.db_path)

    result = await conn.call(tool, args)

    assert result.is_error
    message = text(result)
    first, *lines = message.splitlines()
    assert first == (f"Error executing tool {tool}: {len(fields)} invalid "
                     f"argument{'s' if len(fields) > 1 else ''}"), message
    assert [line.split(":", 1)[0] for line in lines] == sorted(fields), message
    for line in lines:
        for part in fields[line.split(":", 1)[0]]:
            assert part in line, (part, line)
    for raw_pydantic in ("pydantic", "[type=", "input_value", "validation error for"):
        assert raw_pydantic not in message, message
    assert db_digest(conn.db_path) == before
    await assert_still_serving(conn, seeded)


async def test_cursor_of_another_query_is_rejected(shared_conn: Conn):
    conn = shared_conn
    seeded = await seed(conn)
    page = (await conn.ok(SEARCH, query(limit=2, mode="keyword"))).structured_content
    cursor = page["next_cursor"]  # type: ignore[index]
    assert cursor
    before = db_digest(conn.db_path)
    for other in (query(query="entry", cursor=cursor, mode="keyword"),
                  query(cursor=cursor, mode="semantic"),
                  query(cursor=cursor, mode="keyword", role="user"),
                  {"query": LEDGER, "cross_session": True, "cursor": cursor, "mode": "keyword"}):
        result = await conn.call(SEARCH, other)
        assert result.is_error
        assert "cursor belongs to a different query" in text(result)
    assert db_digest(conn.db_path) == before
    await assert_still_serving(conn, seeded)


FTS_SOUP = [
    '"unbalanced AND OR NOT ( NEAR(', "*", "^^", "col:x", "'; DROP TABLE exchanges; --",
    '"', ")", "OR OR", "NEAR(a b, x", "* ledger", "ledger) OR (entry", "{body scope}: ledger",
    "-ledger", "(" * 500, "ledger " + "AND ledger " * 150, "\x00", "😀*",
    'ledger" OR "1"="1',
]


@pytest.mark.parametrize("soup", FTS_SOUP)
async def test_fts_syntax_soup_never_errors_and_changes_nothing(shared_conn: Conn, soup: str):
    conn = shared_conn
    seeded = await seed(conn)
    before = db_digest(conn.db_path)
    # Session-scoped and unscoped expressions fail differently inside FTS5: try both.
    for extra in ({"session_id": S1, "mode": "keyword"}, {"cross_session": True}):
        result = await conn.call(SEARCH, {"query": soup, **extra})
        assert not result.is_error, (soup, extra, text(result))
        sc = result.structured_content
        assert sc is not None and text(result).startswith(f"Found {len(sc['hits'])} of ")
        syntax = [n for n in sc["notes"] if "searched for its words instead" in n]
        assert all(n in syntax or n.startswith(NO_WORD) for n in sc["notes"]), sc["notes"]
        if syntax:
            assert uses_fts_syntax(soup)
    guard = await conn.call(GUARD, {"session_id": S1, "query": soup})
    assert not guard.is_error, text(guard)
    assert db_digest(conn.db_path) == before
    await assert_still_serving(conn, seeded)


async def test_fts_parentheses_cannot_escape_the_session_scope(shared_conn: Conn):
    # Regression: '(<expr>) AND scope:sN' once turned 'other) OR (ledger' into
    # 'other OR (ledger AND scope:sN)', which matched turns of every session.
    conn = shared_conn
    await seed(conn)
    for soup in ("other) OR (ledger", "session) OR (ledger"):
        result = await conn.ok(SEARCH, {"query": soup, "session_id": S1, "mode": "keyword"})
        sessions = {h["session_id"] for h in result.structured_content["hits"]}  # type: ignore[index]
        assert sessions <= {S1}, (soup, sessions)


async def test_lone_surrogates_are_rejected_in_memory(memory: Conn):
    seeded = await seed(memory)
    before = db_digest(memory.db_path)
    for tool, args in ((INGEST, turn(content="half a pair: \ud800 here")),
                       (INGEST, turn(content="\udfff")),
                       (INGEST, turn(session_id="s\ud83d")),
                       (SEARCH, query(query="find \ud800")),
                       (GUARD, {"session_id": S1, "query": "\udc00"}),
                       (MILESTONE, {"session_id": S1, "exchange_id": seeded.s1_ids[0],
                                    "label": "\ud800"})):
        result = await memory.call(tool, args)
        assert result.is_error, (tool, text(result))
        assert "unicode" in text(result).lower() or "surrogate" in text(result).lower()
    assert db_digest(memory.db_path) == before
    await assert_still_serving(memory, seeded)


# --- raw stdio ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawServer]:
    """One hand-driven stdio server (default limits) shared by the raw tests."""
    server = RawServer(tmp_path_factory.mktemp("raw"))
    try:
        reply = server.initialize()
        assert "result" in reply, reply
        yield server
    finally:
        server.close()


_next_id = iter(range(1_000, 10**9))


def rid() -> int:
    return next(_next_id)


def call_ok(raw: RawServer, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    reply = raw.call_tool(rid(), name, arguments)
    assert "result" in reply and reply["result"]["isError"] is False, reply
    return reply["result"]  # type: ignore[no-any-return]


GARBAGE = [
    ("invalid-utf8", b'\xff\xfe{"jsonrpc":"2.0","id":2,"method":"tools/list"}\n'),
    ("malformed-json", b'{"jsonrpc":"2.0","id":3,"method":\n'),
    ("lone-surrogate", b'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":'
                       b'"stenographer_ingest_exchange","arguments":{"role":"user",'
                       b'"content":"half \\ud800 pair","session_id":"raw"}}}\n'),
    ("wrong-version", b'{"jsonrpc":"1.0","id":6,"method":"tools/list"}\n'),
    ("not-an-object", b"[1, 2, 3]\n"),
    ("no-method", b'{"jsonrpc":"2.0","id":5}\n'),
    ("object-id", b'{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}\n'),
    ("binary", bytes(range(256)).replace(b"\n", b"") + b"\n"),
]


def test_raw_stdio_garbage_does_not_stop_the_server(raw: RawServer):
    call_ok(raw, INGEST, {"role": "user", "content": "before the garbage", "session_id": "raw"})
    before = db_counts(raw.data_dir / "steno.db")
    for _, line in GARBAGE:
        raw.send_bytes(line)
    started = time.monotonic()
    reply = call_ok(raw, STATUS, {})
    assert time.monotonic() - started < 30
    assert raw.proc.poll() is None
    assert reply["structuredContent"]["status"]["store"]["exchanges"] == before["exchanges"]
    ingested = call_ok(raw, INGEST, {"role": "user", "content": "after the garbage",
                                     "session_id": "raw"})
    assert INGEST_LINE.fullmatch(ingested["content"][0]["text"])
    raw.drain(0.0)  # leave no stray replies to the next test


@pytest.mark.parametrize(("params", "code"), [
    ({}, -32602), ({"name": STATUS, "arguments": "not an object"}, -32602),
    ({"name": 7}, -32602)])
def test_raw_stdio_invalid_tool_call_params_get_an_error_for_their_id(
        raw: RawServer, params: dict[str, Any], code: int):
    reply = raw.request(request := rid(), "tools/call", params)
    assert reply["id"] == request and reply["error"]["code"] == code, reply
    assert raw.request(request := rid(), "no/such/method")["error"]["code"] == -32601
    call_ok(raw, STATUS, {})


def test_raw_stdio_garbage_is_answered(raw: RawServer):
    for _, line in GARBAGE:
        raw.send_bytes(line)
    probe = rid()
    raw.call_tool(probe, STATUS, {})
    answers = raw.drain(2.0)  # answers to garbage come before or soon after the probe's
    by_id: dict[Any, list[dict[str, Any]]] = {}
    for message in answers:
        by_id.setdefault(message.get("id"), []).append(message)
    # The surrogate request has a readable id: an isError result or an error for id 4.
    [surrogate] = by_id.get(4, [None])
    assert surrogate is not None
    assert "error" in surrogate or surrogate["result"]["isError"] is True
    # A readable id on an invalid request: Invalid Request (-32600) for that id.
    [wrong_version] = by_id.get(6, [None])
    assert wrong_version is not None and wrong_version["error"]["code"] == -32600
    # Unreadable lines: parse errors (-32700) for id null (or the id, if recovered).
    parse_errors = [m for m in answers if "error" in m and m["error"]["code"] == -32700]
    assert len(parse_errors) >= 3, answers  # invalid UTF-8, malformed JSON, binary


@pytest.mark.slow
def test_raw_stdio_one_megabyte_turn_then_search(raw: RawServer):
    needle = "zqmegabyteneedle"
    content = ("lorem ipsum dolor sit amet " * 40_000)[: 1_000_000 - len(needle) - 1]
    content = f"{needle} {content}"
    assert len(content) == 1_000_000 and "\n" not in content
    started = time.monotonic()
    line = json.dumps({"jsonrpc": "2.0", "id": (request := rid()), "method": "tools/call",
                       "params": {"name": INGEST, "arguments": {
                           "role": "tool", "content": content, "session_id": "raw-big"}}})
    raw.send_bytes(line.encode() + b"\n")
    reply = raw.wait_for(request, timeout=60)
    assert reply["result"]["isError"] is False, reply
    m = INGEST_LINE.fullmatch(reply["result"]["content"][0]["text"])
    assert m and int(m["chars"]) == 1_000_000
    hits = call_ok(raw, SEARCH, {"query": needle, "session_id": "raw-big"}
                   )["structuredContent"]["hits"]
    assert [h["exchange_id"] for h in hits] == [int(m["id"])]
    assert time.monotonic() - started < 60
