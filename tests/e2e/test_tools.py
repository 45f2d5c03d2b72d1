"""The six tools and three resources end to end, through the MCP SDK client: in memory
and over stdio, with the current protocol and with the 2025 initialize handshake.

Every test writes to sessions of its own (a stdio server is shared by a module), so ids
are read from replies, never assumed.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from stenographer.models import Flag
from tests.e2e.conftest import Conn, memory_conn
from tests.e2e.support import (
    AUDIT,
    COMPRESSED,
    FORGET,
    GRAPH_QUERY,
    GUARD,
    INGEST,
    INGEST_LINE,
    MILESTONE,
    NOTES,
    REPO_ROOT,
    SEARCH,
    STATUS,
    TOOLS,
    assert_trace,
    runs_in_order,
    text,
    word,
)

pytestmark = pytest.mark.anyio

READERS = {NOTES, GUARD, SEARCH, STATUS, AUDIT, GRAPH_QUERY}
ROLES = ("user", "assistant", "system", "tool")
TURN_LIMIT = 8  # STENO_TURN_LIMIT default
INGEST_NODES = ["validate", "signals", "vector", "store", "reply"]
COMPRESS_NODES = ("batch", "draft", "claim")


async def ingest(conn: Conn, session: str, content: str, role: str = "user",
                 **extra: Any) -> dict[str, Any]:
    result = await conn.ok(INGEST, {"role": role, "content": content, "session_id": session,
                                    **extra})
    sc = result.structured_content
    assert sc is not None and sc["text"] == text(result)
    return sc


async def ingest_many(conn: Conn, session: str, contents: list[str], **extra: Any
                      ) -> list[dict[str, Any]]:
    return [await ingest(conn, session, c, ROLES[i % 4], **extra)
            for i, c in enumerate(contents)]


def brief_headers(markdown: str) -> dict[int, tuple[str, list[int]]]:
    """Brief id -> (tier, source ids) from the `### Brief` lines of notes or a briefing."""
    out = {}
    for m in re.finditer(r"^### Brief (\d+) \(tier-([AB])[^)]*\) — sources ((?:#\d+(?:, )?)+)$",
                         markdown, re.M):
        out[int(m[1])] = (m[2], [int(i) for i in re.findall(r"#(\d+)", m[3])])
    return out


# --- discovery ------------------------------------------------------------------------------

async def test_lists_every_tool_described_annotated_and_with_output_schema(conn: Conn):
    tools = {t.name: t for t in (await conn.client.list_tools()).tools}
    assert set(tools) == set(TOOLS)
    for name, tool in tools.items():
        assert tool.description and len(tool.description) > 150, name
        ann = tool.annotations
        assert ann is not None, name
        assert ann.open_world_hint is False, name
        assert ann.read_only_hint is (name in READERS), name
        assert ann.destructive_hint is (name == FORGET), name
        schema = tool.output_schema
        assert schema and schema["type"] == "object", name
        assert "trace" in schema["properties"] and "trace" in schema["required"], name
    # List items are published by their required keys and a description of every field
    # (cheap for clients to validate on each call), not property by property.
    hit_schema = tools[SEARCH].output_schema["properties"]["hits"]["items"]  # type: ignore[index]
    assert "properties" not in hit_schema
    assert {"exchange_id", "session_id", "snippet", "score", "brief_id"} <= set(
        hit_schema["required"])
    for field in ("exchange_id (integer)", "brief_id (integer | null)", "decisions (list[string])"):
        assert field in hit_schema["description"]
    assert tools[INGEST].annotations.idempotent_hint is False  # type: ignore[union-attr]
    role = tools[INGEST].input_schema["properties"]["role"]
    assert sorted(role["enum"]) == sorted(ROLES)
    assert set(tools[INGEST].input_schema["required"]) == {"role", "content", "session_id"}

    templates = (await conn.client.list_resource_templates()).resource_templates
    assert {t.uri_template: t.mime_type for t in templates} == {
        "omega-stenographer://sessions/{session_id}/notes": "text/markdown",
        "omega-stenographer://sessions/{session_id}/guard": "text/markdown",
        "omega-stenographer://runs/{run_id}": "application/json",
    }


def test_a_tools_reply_is_checked_by_its_output_model_once():
    """Each tool builds its structured content from an instance of its output model
    (building it is the check); the SDK publishes that model's schema and does not
    validate the dumped content against the same model a second time."""
    from stenographer.protocol_errors import StenoServer
    from stenographer.server import mcp

    tools = {t.name: t for t in mcp._tool_manager.list_tools()}
    assert set(tools) == set(TOOLS)
    for name, tool in tools.items():
        assert tool.output_schema and "trace" in tool.output_schema["required"], name
        assert tool.fn_metadata.output_model is None, name

    # A tool that returns its model (not a CallToolResult) keeps the SDK's conversion.
    server = StenoServer("plain")

    async def plain() -> Flag:
        return Flag(signature="MORAL_OVERRIDE", span="x")

    plain.__signature__ = inspect.Signature(return_annotation=Flag)  # type: ignore[attr-defined]
    server.tool(name="plain")(plain)
    assert server._tool_manager.get_tool("plain").fn_metadata.output_model is Flag


# --- ingest ---------------------------------------------------------------------------------

async def test_ingest_reply_line_and_tier_a_compression_on_the_eighth_turn(conn: Conn):
    session = word()
    contents = [f"{session} turn {i} about the schema" for i in range(TURN_LIMIT)]
    contents[2] = "Decision: adopt trunk-based development."
    contents[5] = "The build is blocked by a failing migration."
    replies = await ingest_many(conn, session, contents, trace=True)

    ids = [r["exchange_id"] for r in replies]
    assert ids == sorted(ids) and len(set(ids)) == TURN_LIMIT
    for i, (content, r) in enumerate(zip(contents, replies, strict=True)):
        m = INGEST_LINE.fullmatch(r["text"].splitlines()[0])
        assert m, r["text"]
        assert (m["role"], int(m["id"]), int(m["chars"])) == (ROLES[i % 4], ids[i], len(content))
        assert (int(m["d"]), int(m["b"])) == (len(r["decisions"]), len(r["blockers"]))
        assert r["session_id"] == session and r["chars"] == len(content)
        assert r["duplicate"] is False
        nodes = assert_trace(r["trace"], "ingest")
        if i < TURN_LIMIT - 1:
            assert r["compressed"] == [] and not m["compressed"]
            assert runs_in_order(nodes, INGEST_NODES, absent=COMPRESS_NODES), nodes
        else:
            assert runs_in_order(nodes, [*INGEST_NODES[:4], *COMPRESS_NODES, "reply"]), nodes
    assert replies[2]["decisions"] == ["Decision: adopt trunk-based development."]
    assert replies[5]["blockers"] == ["The build is blocked by a failing migration."]

    last = replies[-1]
    [brief] = last["compressed"]
    assert brief["tier"] == "A" and brief["turns"] == TURN_LIMIT
    assert last["text"].endswith(
        f" | Compressed {TURN_LIMIT} turns → brief {brief['id']} (tier-A)")
    assert COMPRESSED.search(last["text"])

    notes = (await conn.ok(NOTES, {"session_id": session})).structured_content
    assert brief_headers(notes["markdown"]) == {brief["id"]: ("A", ids)}  # type: ignore[index]


async def test_compression_is_tier_b_without_decisions_and_quotes_the_turns(conn: Conn):
    session = word()
    replies = await ingest_many(conn, session, [f"plain note {i} on {session}" for i in range(9)])
    [brief] = replies[TURN_LIMIT - 1]["compressed"]
    assert brief["tier"] == "B"
    assert replies[TURN_LIMIT - 1]["text"].endswith(
        f"| Compressed {TURN_LIMIT} turns → brief {brief['id']} (tier-B)")
    assert replies[TURN_LIMIT]["compressed"] == []  # the 9th turn stays live

    markdown = text(await conn.ok(NOTES, {"session_id": session}))
    ids = [r["exchange_id"] for r in replies]
    assert brief_headers(markdown) == {brief["id"]: ("B", ids[:TURN_LIMIT])}
    for i, exchange_id in enumerate(ids[:TURN_LIMIT]):  # tier B: a verbatim excerpt per turn
        assert f"- #{exchange_id} [{ROLES[i % 4]}] plain note {i} on {session}" in markdown


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_turn_limit_comes_from_the_environment(mode: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch):
    async with memory_conn(mode, tmp_path, monkeypatch, {"STENO_TURN_LIMIT": "3"}) as conn:
        replies = await ingest_many(conn, "s", [f"note {i}" for i in range(7)])
    assert [[b["turns"] for b in r["compressed"]] for r in replies] == [
        [], [], [3], [], [], [3], []]


async def test_source_key_makes_ingest_idempotent(conn: Conn):
    session = word()
    key = f"/transcripts/{session}.jsonl:17"
    first = await ingest(conn, session, "We went with Postgres; it is boring.", source_key=key)
    before = await conn.counts()
    again = await ingest(conn, session, "We went with Postgres; it is boring.", source_key=key,
                         trace=True)
    other = await ingest(conn, session, "a different text, same key", source_key=key,
                         trace=True)
    for r in (again, other):
        assert r["duplicate"] is True
        assert r["exchange_id"] == first["exchange_id"]
        assert r["text"].startswith(f"Already captured #{first['exchange_id']}")
        assert r["compressed"] == []
        assert_trace(r["trace"], "ingest")
    assert await conn.counts() == before
    assert first["duplicate"] is False and first["decisions"]


# --- get_brief ------------------------------------------------------------------------------

async def test_get_brief_sections_citations_and_budget(conn: Conn):
    session = word()
    contents = [f"{session} step {i}: wrote the parser tests" for i in range(11)]
    contents[1] = "We decided to use SQLite with WAL for the store."
    replies = await ingest_many(conn, session, contents)
    ids = [r["exchange_id"] for r in replies]
    [brief] = replies[TURN_LIMIT - 1]["compressed"]
    await conn.ok(MILESTONE, {"session_id": session, "exchange_id": ids[9],
                              "label": "parser done"})

    result = await conn.ok(NOTES, {"session_id": session})
    sc = result.structured_content
    markdown = sc["markdown"]  # type: ignore[index]
    assert text(result) == markdown
    assert_trace(sc["trace"], "notes")  # type: ignore[index]
    lines = markdown.splitlines()
    assert lines[0] == f"# Running notes — session {session!r}"
    sections = [line for line in lines if line.startswith("## ")]
    assert sections == ["## Milestones", "## Compressed briefs",
                        "## Recent exchanges (uncompressed)"]
    recent = markdown.split("## Recent exchanges (uncompressed)")[1]
    assert [int(i) for i in re.findall(r"^- #(\d+) \[", recent, re.M)] == ids[TURN_LIMIT:]
    assert f"- #{ids[9]} **parser done** [assistant]" in markdown
    assert brief_headers(markdown) == {brief["id"]: ("A", ids[:TURN_LIMIT])}
    assert f"- #{ids[1]} We decided to use SQLite with WAL for the store." in markdown
    for line in lines:  # every listed item cites its turn
        if line.startswith("- "):
            assert re.match(r"- #\d+ ", line), line

    small = text(await conn.ok(NOTES, {"session_id": session, "max_chars": 500}))
    assert len(small) <= 500
    assert "… 1 brief (brief " in small  # what did not fit is named
    assert f"#{ids[-1]}" in small  # the newest turn is what a short budget keeps


async def test_get_brief_default_budget_holds_for_long_turns(conn: Conn):
    session = word()
    long_turn = f"{session} " + "lorem ipsum dolor sit amet " * 80  # ~2,200 chars
    for i in range(66):  # 8 briefs of ~1,400 characters and 2 live turns
        await ingest(conn, session, f"{i} {long_turn}")
    markdown = text(await conn.ok(NOTES, {"session_id": session}))
    assert len(markdown) <= 8_000
    assert re.search(r"^… \d+ more .+ \(.+\) left out: raise max_chars$", markdown, re.M)
    big = text(await conn.ok(NOTES, {"session_id": session, "max_chars": 200_000}))
    assert len(big) > len(markdown)
    assert len(brief_headers(big)) == 8
    for tool, args in ((GUARD, {"session_id": session, "query": "lorem", "top_k": 50}),
                       (SEARCH, {"query": "lorem ipsum", "session_id": session, "limit": 50})):
        reply = text(await conn.ok(tool, args))  # every read tool stays within the budget
        assert len(reply) <= 8_000, tool
    for budget in (500, 613, 1_000, 2_500):  # the omission note must fit too
        for tool in (NOTES, GUARD):
            reply = text(await conn.ok(tool, {"session_id": session, "max_chars": budget}))
            assert len(reply) <= budget, (tool, budget)
            assert re.search(r"^… .+ left out(?: to stay within [\d,]+ characters)?: raise "
                             r"max_chars$", reply, re.M), (tool, budget)


HEADING_LEVELS = ((re.compile(r"^## "), 2.0), (re.compile(r"^### "), 3.0),
                  (re.compile(r"^Turns #\d+"), 3.5), (re.compile(r"^[A-Z][a-z]+:$"), 4.0))
LEFT_OUT_NOTE = re.compile(
    r"^… \d[\d,]* .+ \((?:…|#\d+|brief \d+)(?:, (?:…|#\d+|brief \d+))*\) left out: "
    r"raise max_chars$")
LEFT_OUT_LINE = re.compile(r"^… \d[\d,]* .+ left out to stay within [\d,]+ characters: "
                           r"raise max_chars$")


def _level(line: str) -> float | None:
    """How deep a heading or label is (None: an item, a note or a line of text)."""
    return next((level for pattern, level in HEADING_LEVELS if pattern.match(line)), None)


def _sections(markdown: str) -> dict[str, list[str]]:
    """The lines under each `## ` heading."""
    out: dict[str, list[str]] = {}
    current = None
    for line in markdown.splitlines()[1:]:
        if line.startswith("## "):
            current = line
            out[current] = []
        elif current is not None:
            out[current].append(line)
    return out


NOUNS = {"## Milestones": "milestone", "## Compressed briefs": "brief",
         "## Recent exchanges (uncompressed)": "exchange"}


async def test_get_brief_small_budgets_cut_whole_items_and_say_what_was_left_out(conn: Conn):
    session = word()
    contents = [f"Decision: adopt the {session} component {i} for stage {i} of the ingest "
                f"pipeline, with caching and retries" if i % 2 else
                f"{session} note {i} about wiring the pipeline stages together" for i in range(20)]
    ids = [r["exchange_id"] for r in await ingest_many(conn, session, contents)]
    for i in (3, 5, 17, 18):  # two compressed turns, two live ones
        await conn.ok(MILESTONE, {"session_id": session, "exchange_id": ids[i],
                                  "label": f"stage {i} reached"})
    full = text(await conn.ok(NOTES, {"session_id": session, "max_chars": 200_000}))
    assert "left out" not in full
    full_lines = set(full.splitlines())
    full_sections = _sections(full)
    assert set(full_sections) == set(NOUNS)

    for budget in (500, 650, 800, 1_000, 1_300, 1_600, 2_000, 2_500, 3_000):
        markdown = text(await conn.ok(NOTES, {"session_id": session, "max_chars": budget}))
        assert len(markdown) <= budget
        lines = markdown.splitlines()
        for n, line in enumerate(lines):
            if line.startswith("… "):  # a note of what was left out, in its own words
                assert LEFT_OUT_NOTE.match(line) or (
                    LEFT_OUT_LINE.match(line) and n == len(lines) - 1), (budget, line)
                continue
            assert line in full_lines, (budget, line)  # whole items, never half of one
            level = _level(line)
            if level is not None:  # never an empty heading, never a label alone
                after = lines[n + 1] if n + 1 < len(lines) else None
                assert after is not None, (budget, line)
                deeper = _level(after)
                assert deeper is None or deeper > level, (budget, line, after)
        cut = _sections(markdown)
        for heading, items in full_sections.items():
            missing = [i for i in items if i.startswith("- ") and i not in lines]
            if not missing:
                continue
            # each section says what it left out: in place, or in the closing line
            in_place = any(LEFT_OUT_NOTE.match(i) for i in cut.get(heading, []))
            closing = LEFT_OUT_LINE.match(lines[-1]) and NOUNS[heading] in lines[-1]
            assert in_place or closing, (budget, heading, markdown)
    small = text(await conn.ok(NOTES, {"session_id": session, "max_chars": 500}))
    assert f"- #{ids[-1]} [" in small  # a short budget keeps the newest turn
    mid = text(await conn.ok(NOTES, {"session_id": session, "max_chars": 1_600}))
    assert f"- #{ids[18]} **stage 18 reached**" in mid  # and milestones, newest first


async def test_get_brief_of_an_unknown_session_says_nothing_is_recorded(conn: Conn):
    markdown = text(await conn.ok(NOTES, {"session_id": word()}))
    assert "_No turns recorded in this session yet._" in markdown


# --- compact_guard --------------------------------------------------------------------------

async def _three_topic_briefs(conn: Conn, session: str) -> tuple[list[int], list[list[int]],
                                                                 list[int]]:
    topics = ["kubernetes ingress controller certificates",
              "postgres vacuum autovacuum bloat",
              "react hooks rerender memoization"]
    brief_ids, sources = [], []
    for topic in topics:
        replies = await ingest_many(conn, session, [f"{topic} note {i}" for i in range(8)])
        [brief] = replies[-1]["compressed"]
        brief_ids.append(brief["id"])
        sources.append([r["exchange_id"] for r in replies])
    live = [r["exchange_id"] for r in await ingest_many(conn, session, ["wrap up", "next"])]
    return brief_ids, sources, live


async def test_compact_guard_returns_the_brief_whose_turns_match_the_query(conn: Conn):
    session = word()
    brief_ids, sources, live = await _three_topic_briefs(conn, session)

    result = await conn.ok(GUARD, {"session_id": session, "query": "postgres vacuum",
                                   "top_k": 1})
    sc = result.structured_content
    assert sc["brief_ids"] == [brief_ids[1]]  # type: ignore[index]
    assert sc["live_exchange_ids"] == live  # type: ignore[index]
    markdown = sc["markdown"]  # type: ignore[index]
    assert text(result) == markdown
    assert "## Top 1 brief for 'postgres vacuum'" in markdown
    assert brief_headers(markdown) == {brief_ids[1]: ("B", sources[1])}
    recent = markdown.split("## Recent exchanges (uncompressed)")[1]
    assert [int(i) for i in re.findall(r"^- #(\d+) \[", recent, re.M)] == live
    nodes = assert_trace(sc["trace"], "guard")  # type: ignore[index]
    assert runs_in_order(nodes, ["validate", "keyword", "vector", "fuse", "evidence", "reply"])

    ranked = (await conn.ok(GUARD, {"session_id": session, "query": "react memoization",
                                    "top_k": 3})).structured_content
    assert ranked["brief_ids"][0] == brief_ids[2]  # type: ignore[index]


async def test_compact_guard_without_query_returns_the_newest_briefs(conn: Conn):
    session = word()
    brief_ids, _, live = await _three_topic_briefs(conn, session)
    sc = (await conn.ok(GUARD, {"session_id": session, "top_k": 2})).structured_content
    assert sc["brief_ids"] == [brief_ids[2], brief_ids[1]]  # type: ignore[index]
    assert sc["live_exchange_ids"] == live  # type: ignore[index]
    assert "(newest; no query given)" in sc["markdown"]  # type: ignore[index]
    assert runs_in_order(assert_trace(sc["trace"], "guard"),  # type: ignore[index]
                         ["validate", "evidence", "reply"], absent=("keyword", "vector"))
    default = (await conn.ok(GUARD, {"session_id": session})).structured_content
    assert default["brief_ids"] == brief_ids[::-1]  # type: ignore[index]  # top_k 5 > 3
    assert len(default["markdown"]) <= 8_000  # type: ignore[index]


async def test_compact_guard_says_when_no_query_word_matched(conn: Conn):
    session = word()
    brief_ids, sources, _ = await _three_topic_briefs(conn, session)
    sc = (await conn.ok(GUARD, {"session_id": session, "query": "kubernetis certficates",
                                "top_k": 1})).structured_content
    assert sc["brief_ids"] == [brief_ids[0]]  # type: ignore[index]  # similar spelling
    assert sc["vector_only"] == [brief_ids[0]]  # type: ignore[index]
    markdown = sc["markdown"]  # type: ignore[index]
    assert ("_No compressed turn of this session matches a word of the query: the brief "
            "below is ranked by vector similarity only._") in markdown
    header = next(line for line in markdown.splitlines() if line.startswith("### Brief"))
    assert header.startswith(f"### Brief {brief_ids[0]} (tier-B, score ")
    assert ", vector only) — sources " in header
    assert brief_headers(markdown) == {brief_ids[0]: ("B", sources[0])}

    matched = (await conn.ok(GUARD, {"session_id": session, "query": "postgres vacuum",
                                     "top_k": 3})).structured_content
    assert matched["brief_ids"][0] == brief_ids[1]  # type: ignore[index]
    assert brief_ids[1] not in matched["vector_only"]  # type: ignore[index]
    assert "ranked by vector similarity only" not in matched["markdown"]  # type: ignore[index]


# --- mark_milestone -------------------------------------------------------------------------

async def test_milestone_marked_before_compression_makes_its_brief_tier_a(conn: Conn):
    session = word()
    first = await ingest_many(conn, session, [f"routine {session} {i}" for i in range(3)])
    target = first[1]["exchange_id"]
    result = await conn.ok(MILESTONE, {"session_id": session, "exchange_id": target,
                                       "label": "schema  v2\tshipped"})
    sc = result.structured_content
    assert text(result) == f"Milestone #{target} marked: schema v2 shipped"
    assert sc["brief_id"] is None and sc["label"] == "schema v2 shipped"  # type: ignore[index]
    assert runs_in_order(assert_trace(sc["trace"], "milestone"),  # type: ignore[index]
                         ["validate", "mark"])

    rest = await ingest_many(conn, session, [f"routine {session} {i}" for i in range(3, 8)])
    [brief] = rest[-1]["compressed"]
    assert brief["tier"] == "A"  # no decisions in the batch: the milestone made it tier A
    markdown = text(await conn.ok(NOTES, {"session_id": session}))
    assert f"- #{target} **schema v2 shipped** [assistant] (brief {brief['id']})" in markdown
    assert f"- #{target} schema v2 shipped" in markdown  # listed in the brief itself

    again = await conn.ok(MILESTONE, {"session_id": session, "exchange_id": target,
                                      "label": "schema v2 released"})
    assert again.structured_content["brief_id"] == brief["id"]  # type: ignore[index]
    assert text(again).endswith(f"(already in brief {brief['id']})")
    markdown = text(await conn.ok(NOTES, {"session_id": session}))
    assert "**schema v2 released**" in markdown and "**schema v2 shipped**" not in markdown
    assert (await conn.counts())["milestones"] >= 1


async def test_milestone_marked_after_compression_promotes_its_brief_to_tier_a(conn: Conn):
    session = word()
    replies = await ingest_many(conn, session, [f"routine {session} {i}" for i in range(9)])
    ids = [r["exchange_id"] for r in replies]
    [brief] = replies[TURN_LIMIT - 1]["compressed"]
    assert brief["tier"] == "B"  # no decisions, no milestones yet
    target = ids[3]
    result = await conn.ok(MILESTONE, {"session_id": session, "exchange_id": target,
                                       "label": "cutover done"})
    sc = result.structured_content
    assert text(result) == (f"Milestone #{target} marked: cutover done "
                            f"(already in brief {brief['id']}, now tier A)")
    assert sc["brief_id"] == brief["id"] and sc["promoted"] is True  # type: ignore[index]
    markdown = text(await conn.ok(NOTES, {"session_id": session}))
    assert brief_headers(markdown) == {brief["id"]: ("A", ids[:TURN_LIMIT])}
    assert f"- #{target} cutover done" in markdown  # the brief lists its milestone
    guard = text(await conn.ok(GUARD, {"session_id": session, "query": "routine"}))
    assert brief_headers(guard) == {brief["id"]: ("A", ids[:TURN_LIMIT])}

    again = await conn.ok(MILESTONE, {"session_id": session, "exchange_id": target,
                                      "label": "cutover finished"})
    assert text(again).endswith(f"(already in brief {brief['id']})")  # it was tier A
    assert again.structured_content["promoted"] is False  # type: ignore[index]
    markdown = text(await conn.ok(NOTES, {"session_id": session}))
    assert f"- #{target} cutover finished" in markdown
    assert "cutover done" not in markdown  # the brief took the new label too
    live = await conn.ok(MILESTONE, {"session_id": session, "exchange_id": ids[TURN_LIMIT],
                                     "label": "still live"})
    assert live.structured_content["promoted"] is False  # type: ignore[index]
    assert text(live) == f"Milestone #{ids[TURN_LIMIT]} marked: still live"
    audit = (await conn.ok(AUDIT, {"session_id": session})).structured_content
    assert audit["passed"] is True, audit  # type: ignore[index]


# --- query_history --------------------------------------------------------------------------

async def _dated_session(conn: Conn, token: str, days: int = 9) -> tuple[str, list[dict[str,
                                                                                          Any]]]:
    session = word()
    replies = []
    for i in range(days):
        replies.append(await ingest(conn, session, f"{token} entry {i} of the ledger",
                                    ROLES[i % 4], created_at=f"2025-03-{10 + i:02d}T12:00:00Z",
                                    trace_id=f"VT-202503{10 + i:02d}-{i:08x}"))
    return session, replies


async def test_query_history_hits_cite_their_provenance(conn: Conn):
    token = word()
    session, replies = await _dated_session(conn, token)
    [brief] = replies[TURN_LIMIT - 1]["compressed"]
    for mode in ("keyword", "semantic", "hybrid"):
        result = await conn.ok(SEARCH, {"query": token, "session_id": session, "limit": 50,
                                        "mode": mode})
        sc = result.structured_content
        assert sc is not None
        assert sc["total"] == 9 and sc["next_cursor"] is None
        hits = {h["exchange_id"]: h for h in sc["hits"]}
        assert set(hits) == {r["exchange_id"] for r in replies}
        for i, r in enumerate(replies):
            hit = hits[r["exchange_id"]]
            assert hit["session_id"] == session
            assert hit["role"] == ROLES[i % 4]
            assert hit["created_at"] == f"2025-03-{10 + i:02d}T12:00:00Z"
            assert hit["brief_id"] == (brief["id"] if i < TURN_LIMIT else None)
            assert hit["trace_id"] == r["trace_id"] == f"VT-202503{10 + i:02d}-{i:08x}"
            assert token in hit["snippet"]
            assert isinstance(hit["score"], float) and hit["score"] > 0
            line = (f"#{hit['exchange_id']} [{hit['role']}] {session} {hit['created_at']} "
                    f"score {hit['score']:.4f}")
            if hit["brief_id"] is not None:
                line += f" brief {hit['brief_id']}"
            line += f" trace:{hit['trace_id']}"
            assert hit["match"] == ("vector" if mode == "semantic" else "keyword")
            if hit["match"] == "vector":  # no word of the query: the reply marks it
                line += " (vector only)"
            assert line in text(result).splitlines()
        assert text(result).splitlines()[0] == (
            f"Found 9 of 9 hits for {token!r} ({mode}; session {session!r})")
        assert_trace(sc["trace"], "search")


async def test_query_history_is_session_scoped_unless_cross_session(conn: Conn):
    token = word()
    s1, r1 = await _dated_session(conn, token, days=3)
    s2, r2 = await _dated_session(conn, token, days=2)
    ids1, ids2 = {r["exchange_id"] for r in r1}, {r["exchange_id"] for r in r2}
    for mode in ("keyword", "semantic", "hybrid"):
        own = (await conn.ok(SEARCH, {"query": token, "session_id": s1, "mode": mode})
               ).structured_content
        assert {h["exchange_id"] for h in own["hits"]} == ids1  # type: ignore[index]
        every = await conn.ok(SEARCH, {"query": token, "cross_session": True, "mode": mode,
                                       "limit": 50})
        hits = every.structured_content["hits"]  # type: ignore[index]
        # Other sessions of a shared store may be faintly similar; ours rank first.
        best = hits[: len(ids1 | ids2)]
        assert {h["exchange_id"] for h in best} == ids1 | ids2, mode
        assert {h["session_id"] for h in best} == {s1, s2}
        if mode == "keyword":
            assert len(hits) == len(ids1 | ids2)
        assert "all sessions" in text(every).splitlines()[0]


async def test_query_history_role_and_time_filters(conn: Conn):
    token = word()
    session, replies = await _dated_session(conn, token)
    dates = {r["exchange_id"]: f"2025-03-{10 + i:02d}" for i, r in enumerate(replies)}
    roles = {r["exchange_id"]: ROLES[i % 4] for i, r in enumerate(replies)}

    for mode in ("keyword", "semantic", "hybrid"):  # filters apply on both index paths
        async def ids(mode: str = mode, **filters: Any) -> set[int]:
            sc = (await conn.ok(SEARCH, {"query": token, "session_id": session, "limit": 50,
                                         "mode": mode, **filters})).structured_content
            return {h["exchange_id"] for h in sc["hits"]}  # type: ignore[index]

        assert await ids(role="assistant") == {i for i, r in roles.items() if r == "assistant"}
        assert await ids(role="any") == set(roles)
        # since is inclusive, until exclusive; a date alone is midnight UTC
        assert await ids(since="2025-03-12T12:00:00Z") == {
            i for i, d in dates.items() if d >= "2025-03-12"}
        assert await ids(until="2025-03-14") == {i for i, d in dates.items() if d < "2025-03-14"}
        assert await ids(since="2025-03-11", until="2025-03-16T00:00:00+00:00", role="user") == {
            i for i, d in dates.items() if "2025-03-11" <= d < "2025-03-16" and roles[i] == "user"}
        assert await ids(since="2030-01-01") == set()


async def test_cursor_pages_have_no_duplicates_or_gaps(conn: Conn):
    token = word()
    session = word()
    for i in range(23):
        await ingest(conn, session, f"{token} finding number {i} " + "detail " * (i % 5))
    for mode in ("keyword", "semantic", "hybrid"):
        args = {"query": token, "session_id": session, "mode": mode}
        whole = (await conn.ok(SEARCH, {**args, "limit": 50})).structured_content
        expected = [h["exchange_id"] for h in whole["hits"]]  # type: ignore[index]
        assert len(expected) == 23

        seen: list[int] = []
        cursor = None
        for _ in range(10):  # 5 pages expected; bounded in case the cursor never ends
            page = (await conn.ok(SEARCH, {**args, "limit": 5, "cursor": cursor})
                    ).structured_content
            assert page is not None and len(page["hits"]) <= 5
            seen += [h["exchange_id"] for h in page["hits"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert seen == expected, mode  # same order, nothing twice, nothing skipped


async def test_search_modes_take_their_own_paths(conn: Conn):
    session = word()
    await ingest(conn, session, "Lunch was pasta with tomato sauce.")
    target = (await ingest(conn, session, "Set up the kubernetes ingress controller today.")
              )["exchange_id"]

    async def search(query: str, mode: str) -> tuple[list[int], list[str], str]:
        result = await conn.ok(SEARCH, {"query": query, "session_id": session, "mode": mode})
        sc = result.structured_content
        return ([h["exchange_id"] for h in sc["hits"]],  # type: ignore[index]
                assert_trace(sc["trace"], "search"), text(result))  # type: ignore[index]

    hits, nodes, _ = await search("kubernetes", "keyword")
    assert hits[:1] == [target]
    assert runs_in_order(nodes, ["validate", "keyword", "fuse", "page", "reply"],
                         absent=("vector",))
    # A misspelling shares no word with the turn, but its character trigrams match.
    hits, nodes, _ = await search("kubernetis controllr", "keyword")
    assert hits == []
    hits, nodes, _ = await search("kubernetis controllr", "semantic")
    assert hits[:1] == [target]
    assert runs_in_order(nodes, ["validate", "vector", "fuse", "page", "reply"],
                         absent=("terms", "keyword"))
    hits, nodes, _ = await search("kubernetis controllr", "hybrid")
    assert hits[:1] == [target]
    assert runs_in_order(nodes, ["validate", "keyword", "vector", "fuse", "page", "reply"])

    # Natural language: the words are OR-ed, not AND-ed; valid FTS5 syntax is honoured.
    for query in ("when did we set up the ingress for kubernetes?", '"ingress controller"',
                  "kubern*", "NEAR(kubernetes controller, 3)", "ingress OR nonexistentword"):
        hits, _, reply = await search(query, "keyword")
        assert hits[:1] == [target], query
        assert "Note:" not in reply, query
    hits, _, _ = await search('"controller ingress"', "keyword")  # phrase order matters
    assert hits == []


NO_WORD = "Note: no turn searched matches a word of the query"


async def test_hybrid_search_says_when_no_query_word_matched(conn: Conn):
    session = word()
    await ingest(conn, session, "Lunch was pasta with tomato sauce.")
    target = (await ingest(conn, session, "Set up the kubernetes ingress controller today.")
              )["exchange_id"]

    # Misspelt: no turn holds a word of the query; the vectors still find the turn by
    # its character n-grams, and the reply says that this is all it is.
    result = await conn.ok(SEARCH, {"query": "kubernetis controllr", "session_id": session})
    sc = result.structured_content
    assert sc is not None and sc["hits"][0]["exchange_id"] == target
    assert {h["match"] for h in sc["hits"]} == {"vector"}
    lines = text(result).splitlines()
    n = len(sc["hits"])
    note = (f"{NO_WORD}: the {'hit below is' if n == 1 else 'hits below are'} vector-only "
            "(similar spelling or meaning, no word in common).")
    assert lines[1] == note and note.removeprefix("Note: ") in sc["notes"]
    for h in sc["hits"]:
        assert any(line.startswith(f"#{h['exchange_id']} [") and line.endswith(" (vector only)")
                   for line in lines), lines

    matched = (await conn.ok(SEARCH, {"query": "kubernetes", "session_id": session})
               ).structured_content
    assert matched is not None
    assert matched["hits"][0]["exchange_id"] == target
    assert matched["hits"][0]["match"] == "keyword"
    assert not any(NO_WORD.removeprefix("Note: ") in n for n in matched["notes"])

    nothing = await conn.ok(SEARCH, {"query": "kubernetes", "session_id": session,
                                     "mode": "keyword", "role": "system"})
    assert text(nothing).splitlines()[1] == f"{NO_WORD}: nothing matched."
    semantic = await conn.ok(SEARCH, {"query": "kubernetis controllr", "session_id": session,
                                      "mode": "semantic"})
    assert NO_WORD not in text(semantic)  # the keyword index was not asked


# --- resources ------------------------------------------------------------------------------

async def read_run(conn: Conn, run_id: str) -> str:
    """The run resource: the trace graph flushes pending traces before reading, so a
    run is found right after the call that made it."""
    with anyio.fail_after(10):
        return await conn.read(f"omega-stenographer://runs/{run_id}")


async def test_run_resource_returns_the_trace_of_a_tool_call(conn: Conn):
    session = word()
    for args, tool in (({"role": "user", "content": "trace me", "session_id": session,
                         "trace": True}, INGEST),
                       ({"query": "trace", "session_id": session}, SEARCH),
                       ({"session_id": session}, NOTES)):
        trace = (await conn.ok(tool, args)).structured_content["trace"]  # type: ignore[index]
        stored = json.loads(await read_run(conn, trace["run_id"]))
        assert stored["run_id"] == trace["run_id"]
        assert stored["graph"] == trace["graph"] and stored["status"] == "Completed"
        assert [s["node"] for s in stored["stages"]] == [s["node"] for s in trace["stages"]]
        assert_trace(stored, trace["graph"])

    with pytest.raises(MCPError, match="no stored run"):
        await conn.read("omega-stenographer://runs/" + "0" * 32)


async def test_an_ingest_reply_names_its_run_and_holds_the_stages_only_on_request(conn: Conn):
    session = word()
    result = await conn.ok(INGEST, {"role": "user", "content": "short reply please",
                                    "session_id": session})
    sc = result.structured_content
    assert sc is not None
    trace = sc["trace"]
    assert set(trace) == {"run_id", "graph", "status", "duration_ms", "stages"}
    assert trace["graph"] == "ingest" and trace["status"] == "Completed"
    assert trace["stages"] == []  # the run id always, the stages on request
    assert len(json.dumps(sc)) < 1_000, sc
    stored = json.loads(await read_run(conn, trace["run_id"]))  # the whole trace is kept
    assert runs_in_order(assert_trace(stored, "ingest"), INGEST_NODES), stored
    full = (await conn.ok(INGEST, {"role": "user", "content": "a long reply now",
                                   "session_id": session, "trace": True})).structured_content
    assert full is not None
    assert runs_in_order(assert_trace(full["trace"], "ingest"), INGEST_NODES), full


async def test_notes_and_guard_resources_match_the_tools(conn: Conn):
    session = word()
    await ingest_many(conn, session, [f"{session} resource check {i}" for i in range(10)])
    notes = text(await conn.ok(NOTES, {"session_id": session}))
    guard = text(await conn.ok(GUARD, {"session_id": session}))
    assert await conn.read(f"omega-stenographer://sessions/{session}/notes") == notes
    assert await conn.read(f"omega-stenographer://sessions/{session}/guard") == guard
    assert guard.startswith(f"# Compaction briefing — session {session!r}")
    unknown = await conn.read(f"omega-stenographer://sessions/{word()}/notes")
    assert "_No turns recorded in this session yet._" in unknown


# --- server metadata, resource listing, counts in words --------------------------------------

def _package_version() -> str:
    with (REPO_ROOT / "pyproject.toml").open("rb") as f:
        declared = str(tomllib.load(f)["project"]["version"])
    assert importlib.metadata.version("omega-stenographer-mcp") == declared
    return declared


async def test_server_info_reports_the_package_version(conn: Conn):
    info = conn.client.server_info
    assert info is not None and info.name == "omega-stenographer"
    assert info.version == _package_version()


NOTES_PREFIX = "omega-stenographer://sessions/"


async def test_resources_list_names_the_notes_of_the_recent_sessions(conn: Conn):
    sessions = [word(), f"{word()} a b/../c:d", word()]  # any session id has a URI
    for n, session in enumerate(sessions):
        await ingest_many(conn, session, [f"note {i} of {session}" for i in range(n + 1)])
    listed = [r for r in (await conn.client.list_resources()).resources
              if str(r.uri).startswith(NOTES_PREFIX)]
    assert 3 <= len(listed) <= 50
    newest_first = listed[:3]  # by last activity: the last session written comes first
    for n, (resource, session) in enumerate(zip(newest_first, reversed(sessions), strict=True)):
        turns = len(sessions) - n
        assert resource.mime_type == "text/markdown"
        assert resource.name == f"notes of {session}"
        assert resource.description is not None
        assert resource.description.startswith(
            f"Running notes of session {session!r} (as stenographer_get_brief): "
            f"{turns} turn{'' if turns == 1 else 's'}, 0 briefs, 0 milestones; last activity ")
        notes = text(await conn.ok(NOTES, {"session_id": session}))
        assert await conn.read(str(resource.uri)) == notes  # the listed URI reads them
    templates = (await conn.client.list_resource_templates()).resource_templates
    assert len(templates) == 3  # the templates stay


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_resources_list_is_bounded_to_the_most_recent_sessions(
        mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    async with memory_conn(mode, tmp_path, monkeypatch, {}) as conn:
        sessions = [f"s{i:02d}" for i in range(52)]
        for session in sessions:
            await ingest(conn, session, f"a turn of {session}")
        listed = [str(r.uri) for r in (await conn.client.list_resources()).resources]
    assert listed == [f"{NOTES_PREFIX}{s}/notes" for s in reversed(sessions[-50:])]


async def test_counts_read_in_the_singular_when_there_is_one(memory: Conn):
    session = word()
    replies = await ingest_many(memory, session, [f"turn {i} of {session}" for i in range(8)])
    [brief] = replies[-1]["compressed"]
    await memory.ok(MILESTONE, {"session_id": session, "exchange_id": replies[0]["exchange_id"],
                                "label": "first"})
    status = text(await memory.ok(STATUS))
    assert ": 8 exchanges in 1 session (0 uncompressed), 1 brief, 1 milestone, " in status
    guard = text(await memory.ok(GUARD, {"session_id": session, "query": "turn", "top_k": 1}))
    assert "## Top 1 brief for 'turn'" in guard and f"### Brief {brief['id']} " in guard
    found = text(await memory.ok(SEARCH, {"query": "turn 3", "session_id": session,
                                          "mode": "keyword", "limit": 1}))
    assert found.startswith("Found 1 of 8 hits for 'turn 3'")
    one = text(await memory.ok(SEARCH, {"query": f'"turn 3 of {session}"', "session_id": session,
                                        "mode": "keyword"}))
    assert one.startswith("Found 1 of 1 hit for ")


# --- capture_status -------------------------------------------------------------------------

async def test_capture_status_reports_store_counts(conn: Conn):
    before = await conn.counts()
    await ingest(conn, word(), "counted")
    result = await conn.ok(STATUS)
    sc = result.structured_content
    assert sc is not None
    status = sc["status"]
    assert set(status) >= {"store", "capture", "delivery"}
    after = {k: status["store"][k] for k in before}
    assert after["exchanges"] == before["exchanges"] + 1
    assert after["sessions"] == before["sessions"] + 1
    assert status["store"]["path"] == str(conn.db_path)  # the file, or the database URL
    plural = "" if after["exchanges"] == 1 else "s"
    assert text(result).startswith(f"Store {status['store']['path']}: "
                                   f"{after['exchanges']:,} exchange{plural} in ")
    assert "status" in assert_trace(sc["trace"], "status")
