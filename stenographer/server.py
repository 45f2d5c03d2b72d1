"""The MCP server: the tools, three resource templates (and the recent sessions' notes
listed as resources), stdio by default.

Each tool is thin: its typed signature is the input schema, its docstring the
description; it runs one named graph and returns the result with the stage trace.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Annotated, Any, Literal

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.server.mcpserver.resources import ResourceSecurity
from mcp.shared.uri_template import UriTemplate
from mcp.types import Annotations, CallToolResult, Resource, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from nodes.publish.wording import counted
from stenographer import __version__
from stenographer.models import (
    AuditReport,
    CaptureStatus,
    Forgot,
    GraphQueryResult,
    GuardResult,
    HistoryPage,
    Ingested,
    MilestoneMarked,
    NotesResult,
    Trace,
)
from stenographer.protocol_errors import StenoServer
from store.errors import NotFound, StenoError

if TYPE_CHECKING:
    from stenographer.app import App
    from stenographer.scheduler import Scheduler

__all__ = ["failure_text", "main", "mcp", "serve_stdio"]

_log = logging.getLogger("stenographer.server")

INSTRUCTIONS = """\
Omega Stenographer is the memory of this work. Call stenographer_ingest_exchange for
every turn (user, assistant, tool) with one session_id per conversation. Use
stenographer_query_history to find earlier turns (every hit cites its exchange id),
stenographer_get_brief for the running notes of a session, and
stenographer_compact_guard right before the context is compacted, and
stenographer_graph_query to see how components, files, people and decisions connect
(once the operator has run `stenographer graphrag extract`). It never approves,
blocks or steers: it only records, extracts, compresses and finds."""


class AppLoader:
    """Opens the application on a background thread so that the MCP handshake does
    not wait for the graph engine, numpy and the store (cold start); the first tool
    call waits for it if it is not ready yet."""

    def __init__(self) -> None:
        self._app: App | None = None
        # Scheduler jobs: a push when STENO_SYNC_PEER is set, publishing when a bus is
        self._jobs: list[Scheduler] = []
        self._error: BaseException | None = None
        self._ready = threading.Event()
        threading.Thread(target=self._open, name="steno-open", daemon=True).start()

    def _open(self) -> None:
        try:
            from stenographer.app import open_app

            self._app = open_app()
        except BaseException as ex:  # reported to every caller, never swallowed
            self._error = ex
        else:
            if self._app.store.read_only:  # nothing that writes runs in the background
                print(f"omega-stenographer: {self._app.store.location} is read-only: "
                      "serving reads; calls that write are refused", file=sys.stderr)
                return
            try:  # finish a compression that a crash interrupted; never fatal
                self._app.finish_compression()
            except Exception as ex:
                print(f"omega-stenographer: unfinished compression not completed: {ex}",
                      file=sys.stderr)
            # Finish, in the background, file rewrites after a forget that another
            # process (or this store's last server) left pending.
            self._app.store.file_rewrite.watch()
            from stenographer.scheduler import Scheduler

            if self._app.settings.sync_peer is not None:
                from stenographer.sync import background_push

                self._jobs.append(Scheduler(background_push(self._app)).start())
            if self._app.settings.bus_path is not None and self._app.settings.bus_publish:
                from stenographer.bus import background_publish

                self._jobs.append(Scheduler(background_publish(self._app)).start())
        finally:
            self._ready.set()

    async def app(self) -> App:
        if not self._ready.is_set():
            await anyio.to_thread.run_sync(self._ready.wait)
        if self._error is not None:
            raise ToolError(_opening_failure(self._error))
        assert self._app is not None
        return self._app

    def close(self) -> None:
        self._ready.wait()
        for job in self._jobs:
            job.stop()
        if self._app is not None:
            self._app.close()


def _opening_failure(error: BaseException) -> str:
    """Why the application could not be opened, for every call that needed it."""
    from stenographer.settings import SettingsError

    if isinstance(error, SettingsError):
        return f"the server's settings are not valid: {error}"
    if isinstance(error, StenoError):  # says which store and why
        return str(error)
    return f"the store could not be opened: {type(error).__name__}: {error}"


@asynccontextmanager
async def lifespan(server: MCPServer[AppLoader]) -> AsyncIterator[AppLoader]:
    loader = AppLoader()
    try:
        yield loader
    finally:
        loader.close()


NOTES_URI = "omega-stenographer://sessions/{session_id}/notes"
GUARD_URI = "omega-stenographer://sessions/{session_id}/guard"
LISTED_SESSIONS = 50  # sessions whose notes resources/list names: the most recently active
# A session id is a name, not a path: ".." or a leading "/" in it is no traversal.
SESSION_NAMES = ResourceSecurity(reject_path_traversal=False, reject_absolute_paths=False)


async def _session_notes(ctx: ServerRequestContext[Any, Any], call_next: CallNext
                         ) -> HandlerResult:
    """resources/list: the fixed resources (there are none), then the notes of the
    LISTED_SESSIONS most recently active sessions, for hosts that list resources but not
    templates. The templates stay as they are."""
    if ctx.method != "resources/list":
        return await call_next(ctx)
    result = await call_next(ctx)
    loader: AppLoader = ctx.lifespan_context
    try:
        app = await loader.app()
        out, _ = app.run("sessions", {"limit": LISTED_SESSIONS})
    except (ToolError, StenoError):
        return result  # the store cannot be read now: the tools will say why
    template = UriTemplate.parse(NOTES_URI)
    listed = [Resource(
        uri=template.expand({"session_id": s["session_id"]}),
        name=f"notes of {s['session_id']}",
        title=f"Running notes — session {s['session_id']!r}",
        description=(f"Running notes of session {s['session_id']!r} (as stenographer_get_brief)"
                     f": {counted(s['turns'], 'turn')}, {counted(s['briefs'], 'brief')}, "
                     f"{counted(s['milestones'], 'milestone')}; last activity {s['last_at']}"),
        mime_type="text/markdown",
        annotations=Annotations(last_modified=s["last_at"]),
    ).model_dump(by_alias=True, mode="json", exclude_none=True) for s in out["sessions"]]
    wire = (result.model_dump(by_alias=True, mode="json", exclude_none=True)
            if isinstance(result, BaseModel) else dict(result or {}))
    return {**wire, "resources": [*wire.get("resources", []), *listed]}


mcp: MCPServer[AppLoader] = StenoServer("omega-stenographer", instructions=INSTRUCTIONS,
                                       version=__version__, lifespan=lifespan,
                                       middleware=[_session_notes])

SessionId = Annotated[str, Field(min_length=1, max_length=200, description=(
    "The conversation this turn belongs to: any stable string of 1-200 characters, "
    "e.g. the host's conversation id. Case-sensitive."))]
MaxChars = Annotated[int | None, Field(ge=500, le=200_000, description=(
    "Reply budget in characters (500-200000); default STENO_MAX_CHARS (8000)."))]

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                       open_world_hint=False)


INLINE_CHARS = 32_000  # larger turns are processed on a worker thread


async def _run(ctx: Context[AppLoader], graph: str, request: dict[str, Any], *, inline: bool = True
               ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run a graph for a tool call.

    Short runs (well under a millisecond to a few ms) run on the event loop: handing
    them to a worker thread costs more than the run, and the GIL serialises them
    anyway. Potentially long runs (a huge turn) go to a worker thread so that other
    callers are not held up.
    """
    app = await ctx.request_context.lifespan_context.app()
    if app.settings.embeddings is not None and graph in ("search", "guard"):
        inline = False  # an embedding provider means HTTP calls: keep them off the loop
    try:
        if inline:
            return app.run(graph, request)
        return await anyio.to_thread.run_sync(app.run, graph, request)
    except Exception as ex:
        raise ToolError(failure_text(ex)) from None


def failure_text(ex: Exception) -> str:
    """What a caller is told about a graph run that raised ``ex``: every failure of a
    tool (or resource) call becomes its error reply here.

    Errors of ours (bad input, not found, a store that cannot do what was asked: full,
    read-only, damaged, locked) say what happened and what to do; anything else is
    reported with the graph, stage and run that raised it (the traceback goes to
    stderr)."""
    if isinstance(ex, StenoError):
        return str(ex)
    _log.error("graph run failed", exc_info=ex)
    graph, node = getattr(ex, "graph", None) or "?", getattr(ex, "node", None) or "?"
    trace = getattr(ex, "stage_trace", None) or {}
    return (f"internal error in the {graph} graph, stage {node}: {type(ex).__name__}: "
            f"{ex}. Not caused by the call's arguments: `stenographer doctor` and "
            f"`stenographer audit` check the set-up and the store (stage trace "
            f"{trace.get('run_id', '?')}).")


def _result(text: str, model: Any) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=model.model_dump(mode="json"))


@mcp.tool(name="stenographer_ingest_exchange", annotations=ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False,
    open_world_hint=False))
async def ingest_exchange(
    role: Annotated[Literal["user", "assistant", "system", "tool"], Field(
        description="Who spoke: user, assistant, system or tool.")],
    content: Annotated[str, Field(min_length=1, description=(
        "The turn's full text, verbatim (1 to STENO_MAX_CONTENT_CHARS characters, "
        "default 1,000,000). Credentials in it (cloud keys, tokens, private keys, URL "
        "passwords, bearer headers, secret assignments) are stored as [REDACTED:<kind>] "
        "unless STENO_REDACT_SECRETS=off."))],
    session_id: SessionId,
    ctx: Context[AppLoader],
    trace_id: Annotated[str | None, Field(description=(
        "Optional correlation id in the form VT-YYYYMMDD-xxxxxxxx (8 digits, 8 lowercase "
        "hex digits), e.g. from omega_preload_context. Omitted: the session's trace id, "
        "created once per session in that form."))] = None,
    source_key: Annotated[str | None, Field(max_length=500, description=(
        "Optional idempotency key (e.g. transcript file + line). A key already stored "
        "is not stored again: the reply says 'Already captured' with the existing id."))] = None,
    created_at: Annotated[str | None, Field(description=(
        "When the turn happened, ISO 8601 (e.g. 2026-11-30T14:05:00Z; no zone means UTC). "
        "Default: now."))] = None,
    trace: Annotated[bool, Field(description=(
        "Also return the stages of the stage trace (default false: its run id, status "
        "and duration only; the whole trace is the resource "
        "omega-stenographer://runs/{run_id})."))] = False,
) -> Annotated[CallToolResult, Ingested]:
    """Record one conversation turn in the memory. Call it for every turn, in order.

    It redacts credentials, stores the text, extracts decisions and blockers (regex, no
    model), flags NAFE reasoning-drift signatures in assistant turns (NARRATIVE_RESCUE,
    MORAL_OVERRIDE, AUTHORITY_DRIFT, INTENT_INFERENCE: heuristic notes, never blockers),
    indexes the turn for keyword and vector search, and when the session has
    STENO_TURN_LIMIT (default 8) uncompressed turns, compresses the oldest into a brief
    that cites them (the turns stay stored and searchable). When the coordination bus
    (VERITAS_SHARED_DIR) holds CLAEG_TERMINAL_SHUTDOWN events for this session_id not yet
    recorded, each is first recorded once as a system turn marked milestone
    TERMINAL_SHUTDOWN and acknowledged on the bus; a missing or busy bus is skipped.

    Returns one line: `Ingested [<role>] #<id> (<N> chars; decisions: D; blockers: B;
    trace:<trace id>)`, with `; redacted: R` after the blockers when secrets were
    replaced and `; ⚠ NAFE:<SIG>[,<SIG>]` before the trace when flags were raised, plus
    `| Compressed K turns → brief <id> (tier-A/B)` when compression ran,
    `| CLAEG terminal shutdown from <source> at <time> → #<id> (milestone)` per shutdown
    event recorded, or
    `Already captured #<id> ...` for a repeated source_key; the structured result adds
    the extracted sentences, the flags with their spans and the run id of the stage
    trace (its stages with trace=true).
    Side effects: writes to the local store only. Errors: an invalid role, empty or
    oversized content, invalid text (lone surrogates) or a malformed trace_id or
    created_at is rejected with a message saying what is valid; nothing is stored.
    """
    out, run = await _run(ctx, "ingest", {
        "role": role, "content": content, "session_id": session_id, "trace_id": trace_id,
        "source_key": source_key, "created_at": created_at},
        inline=len(content) <= INLINE_CHARS)
    reply = out["reply"]
    stages = run["stages"] if trace else []
    return _result(reply["text"], Ingested(**reply, trace=Trace(**{**run, "stages": stages})))


@mcp.tool(name="stenographer_get_brief", annotations=READ)
async def get_brief(session_id: SessionId, ctx: Context[AppLoader], max_chars: MaxChars = None
              ) -> Annotated[CallToolResult, NotesResult]:
    """The running notes of a session, as Markdown: milestones, then compressed briefs,
    then the recent uncompressed exchanges (newest last), every item citing `#ids`.

    Use it to catch up on a whole session; use stenographer_query_history to find
    specific turns, and stenographer_compact_guard right before compaction. The reply
    fits max_chars (default 8000): items are kept whole (the newest first), and each
    section says what it left out, e.g. "… 3 more decisions (#12, #40, #41) left out:
    raise max_chars". Read-only. An unknown session gives notes that say nothing is
    recorded.
    """
    out, trace = await _run(ctx, "notes", {"session_id": session_id, "max_chars": max_chars})
    return _result(out["markdown"], NotesResult(markdown=out["markdown"], trace=Trace(**trace)))


@mcp.tool(name="stenographer_compact_guard", annotations=READ)
async def compact_guard(
    session_id: SessionId,
    ctx: Context[AppLoader],
    query: Annotated[str | None, Field(max_length=2_000, description=(
        "What the next steps are about; the briefs whose source turns match it best "
        "are returned. Omit to get the newest briefs."))] = None,
    top_k: Annotated[int | None, Field(ge=1, le=50, description=(
        "How many briefs (1-50); default STENO_TOP_K (5)."))] = None,
    max_chars: MaxChars = None,
) -> Annotated[CallToolResult, GuardResult]:
    """Call right before (or at) context compaction: the live uncompressed turns of the
    session plus the top-K compressed briefs most relevant to `query` (hybrid keyword +
    vector ranking of their source turns; newest briefs when no query), each brief
    listing its source turn ids. When no compressed turn matches a word of the query,
    the briefing says so: the briefs it returns then only resemble the query in
    spelling or meaning (marked "vector only", listed in vector_only). Markdown within
    max_chars (default 8000), items kept whole. Read-only.

    Use stenographer_get_brief for the whole running notes instead.
    """
    out, trace = await _run(ctx, "guard", {"session_id": session_id, "query": query,
                                      "top_k": top_k, "max_chars": max_chars})
    model = GuardResult(markdown=out["markdown"], brief_ids=[b["id"] for b in out["briefs"]],
                        vector_only=[b["id"] for b in out["briefs"] if b.get("match") == "vector"],
                        live_exchange_ids=[t["id"] for t in out["live"]], trace=Trace(**trace))
    return _result(out["markdown"], model)


@mcp.tool(name="stenographer_mark_milestone", annotations=ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True,
    open_world_hint=False))
async def mark_milestone(
    session_id: SessionId,
    exchange_id: Annotated[int, Field(ge=1, le=2**63 - 1, description=(
        "The #id of a turn of this session (from an ingest reply or a search hit)."))],
    label: Annotated[str, Field(min_length=1, max_length=200, description=(
        "Short name of the milestone, e.g. 'schema v2 shipped' (1-200 characters)."))],
    ctx: Context[AppLoader],
) -> Annotated[CallToolResult, MilestoneMarked]:
    """Flag a turn as a milestone: tier-A priority, always listed in the running notes,
    and the brief that holds it is tier A. A turn already compressed has its brief made
    again at once, as tier A listing the milestone (the reply ends `(already in brief
    <id>, now tier A)` when that promoted it). Marking the same turn again replaces its
    label, in the brief too. Errors: an exchange id that does not exist or belongs to
    another session.
    """
    out, trace = await _run(ctx, "milestone", {"session_id": session_id,
                                          "exchange_id": exchange_id, "label": label})
    reply = out["reply"]
    return _result(reply["text"], MilestoneMarked(**reply, trace=Trace(**trace)))


@mcp.tool(name="stenographer_query_history", annotations=READ)
async def query_history(
    query: Annotated[str, Field(min_length=1, max_length=2_000, description=(
        "What to find. A plain question works ('when did we drop Redis?'); FTS5 syntax "
        "is honoured when valid: \"exact phrase\", prefix*, a OR b, NEAR(a b, 5). "
        "Invalid syntax falls back to a word search and says so."))],
    ctx: Context[AppLoader],
    session_id: Annotated[str | None, Field(max_length=200, description=(
        "Search this session. Required unless cross_session is true."))] = None,
    cross_session: Annotated[bool, Field(description=(
        "Search every session (default false)."))] = False,
    limit: Annotated[int, Field(ge=1, le=50, description="Hits per page (1-50).")] = 10,
    cursor: Annotated[str | None, Field(max_length=500, description=(
        "next_cursor of the previous page, with the same query and filters."))] = None,
    mode: Annotated[Literal["hybrid", "keyword", "semantic"], Field(description=(
        "hybrid (default): keyword BM25 and vectors fused; keyword; semantic."))] = "hybrid",
    role: Annotated[Literal["any", "user", "assistant", "system", "tool"], Field(
        description="Only turns by this speaker.")] = "any",
    since: Annotated[str | None, Field(description=(
        "Only turns at or after this ISO 8601 time."))] = None,
    until: Annotated[str | None, Field(description=(
        "Only turns before this ISO 8601 time."))] = None,
    trace_id: Annotated[str | None, Field(max_length=40, description=(
        "Only turns with this trace id (VT-YYYYMMDD-xxxxxxxx), e.g. to correlate with "
        "other tools of the same task."))] = None,
    flag: Annotated[Literal["NAFE", "NARRATIVE_RESCUE", "MORAL_OVERRIDE", "AUTHORITY_DRIFT",
                            "INTENT_INFERENCE"] | None, Field(description=(
        "Only assistant turns flagged with this NAFE reasoning-drift signature (NAFE: "
        "any of the four)."))] = None,
) -> Annotated[CallToolResult, HistoryPage]:
    """Search every recorded exchange of a session (compressed ones included), best
    first. Each hit cites its provenance: exchange id, session, role, time, trace id,
    score, snippet, extracted decisions and blockers, NAFE flags, and the brief that
    holds it.

    Each hit says why it ranks (`match`): keyword (a word of the query is in the turn,
    its neighbours' context or its date), vector (only similar spelling or meaning, no
    word in common; marked "(vector only)") or answer (the turn right after a ranked
    question). When the keyword index matches no turn, the reply says so in a note
    ("no turn searched matches a word of the query") and any hybrid hits are all
    vector-only. Use it to find specific turns; stenographer_get_brief summarises a
    session. Returns up to `limit` hits and `next_cursor` for more (at most 200 ranked
    candidates per query); text within 8000 characters, hits kept whole. Read-only.
    Errors: a missing session_id without cross_session, a bad cursor, an invalid time
    or trace_id.
    """
    out, trace = await _run(ctx, "search", {
        "query": query, "session_id": session_id, "cross_session": cross_session,
        "limit": limit, "cursor": cursor, "mode": mode, "role": role, "since": since,
        "until": until, "trace_id": trace_id, "flag": flag})
    model = HistoryPage(text=out["text"], hits=out["hits"], total=out["total"] or 0,
                        next_cursor=out["next_cursor"], notes=out["notes"] or [],
                        trace=Trace(**trace))
    return _result(out["text"], model)


@mcp.tool(name="stenographer_capture_status", annotations=READ)
async def capture_status(ctx: Context[AppLoader]) -> Annotated[CallToolResult, CaptureStatus]:
    """Automatic capture progress (transcript watchers: files, offsets, last success,
    errors), delivery status (sync outbox: pending, delivered, last error), the
    coordination bus (state: ok, missing, locked, corrupt, unusable; shutdown events
    unacknowledged and recorded; this process's last error and back-off; turns
    published as STENO_EXCHANGE events: delivered, pending, last success and error) and store
    counts (sessions, exchanges, briefs, size; the file rewrite after a forget: pending
    or done). Read-only; about 1.5 KB.
    """
    out, trace = await _run(ctx, "status", {})
    return _result(out["text"], CaptureStatus(text=out["text"], status=out["status"],
                                              trace=Trace(**trace)))


@mcp.tool(name="stenographer_audit", annotations=READ)
async def audit(
    ctx: Context[AppLoader],
    session_id: Annotated[str | None, Field(max_length=200, description=(
        "Audit this session only; omit to audit the whole store."))] = None,
) -> Annotated[CallToolResult, AuditReport]:
    """Check that the store keeps its promises (the contract audit): turn content
    matches its hash; the provenance hash chain of every session is unbroken (through
    the tombstones of forgotten turns); every brief's source turns exist and match the
    hashes it recorded; every compressed turn is in exactly one brief; no session is
    left with a full batch of uncompressed turns; the keyword and vector indexes hold
    exactly the stored turns; milestones point at existing turns; stage traces are
    within retention. Reads the store in bounded pages (any size). Read-only.

    Returns one line per contract (pass/fail, counts, violating ids); the structured
    result lists per contract the first 100 ids and a few explanations. Errors: an
    unknown session_id.
    """
    out, trace = await _run(ctx, "contract_audit", {"session_id": session_id}, inline=False)
    report = out["report"]
    return _result(report["text"], AuditReport(**report, trace=Trace(**trace)))


@mcp.tool(name="stenographer_forget", annotations=ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True,
    open_world_hint=False))
async def forget(
    ctx: Context[AppLoader],
    confirm: Annotated[bool, Field(description=(
        "Must be true: forgetting deletes turns for good and cannot be undone."))] = False,
    exchange_ids: Annotated[list[int] | None, Field(max_length=10_000, description=(
        "Forget these turns (#ids from ingest replies or search hits)."))] = None,
    session_id: Annotated[str | None, Field(max_length=200, description=(
        "Forget the turns of this session (alone: the whole session)."))] = None,
    since: Annotated[str | None, Field(description=(
        "Forget turns recorded at or after this ISO 8601 time."))] = None,
    until: Annotated[str | None, Field(description=(
        "Forget turns recorded before this ISO 8601 time."))] = None,
    text: Annotated[str | None, Field(max_length=10_000, description=(
        "Forget every turn whose content contains this literal text (case-sensitive, "
        "at least 4 characters), e.g. a leaked secret. Milestone labels that contain it "
        "are deleted too (stage traces never hold text)."))] = None,
    reason: Annotated[str | None, Field(max_length=500, description=(
        "Why (recorded in the tombstones); default 'forgotten on request'."))] = None,
) -> Annotated[CallToolResult, Forgot]:
    """Delete turns for good: DESTRUCTIVE, requires confirm=true. Select by exchange_ids,
    session_id, a since/until time range and/or a literal text; every given filter must
    match. The turns leave the store and the keyword and vector indexes; the briefs that
    cited them are rebuilt from their remaining sources (removed when none remain); a
    tombstone per turn records its id, hashes, time and reason, never its content, so
    the provenance chain and the audit stay whole. The file is then rewritten (VACUUM)
    so that the text is not recoverable from it; while another connection holds a read
    snapshot of the old pages, the rewrite finishes in the background once it lets go
    (rewrite_pending; capture_status shows it). The forgotten text is never echoed.

    Returns `Forgot N turns in M sessions: ...` or `Nothing forgotten: ...`; the structured result
    lists ids (first 1000), rebuilt and removed briefs. Takes seconds on a large store
    (the rewrite). Errors: confirm missing, no filter, an unknown session, a bad time.
    """
    out, trace = await _run(ctx, "forget", {
        "confirm": confirm, "exchange_ids": exchange_ids, "session_id": session_id,
        "since": since, "until": until, "text": text, "reason": reason}, inline=False)
    reply = out["reply"]
    return _result(reply["text"], Forgot(**reply, trace=Trace(**trace)))
@mcp.tool(name="stenographer_graph_query", annotations=READ)
async def graph_query(
    query: Annotated[str, Field(min_length=1, max_length=2_000, description=(
        "A question or names: 'what blocked the postgres migration?', 'sqlite-vec'. Its "
        "entities (names, files, issues, packages, code, phrases) are looked up."))],
    ctx: Context[AppLoader],
    session_id: Annotated[str | None, Field(max_length=200, description=(
        "Use only links supported by turns of this session. Required unless "
        "cross_session is true."))] = None,
    cross_session: Annotated[bool, Field(description=(
        "Use the links of every session (default false)."))] = False,
    hops: Annotated[int, Field(ge=1, le=3, description=(
        "How far from the query's entities to look (1-3, default 2)."))] = 2,
    limit: Annotated[int, Field(ge=1, le=50, description=(
        "Entities, relations and turns to return, each (1-50, default 10)."))] = 10,
) -> Annotated[CallToolResult, GraphQueryResult]:
    """Ask the knowledge graph of the work: which entities, relations and turns connect
    to what the query names. It matches the query's entities, ranks their neighbourhood
    (up to `hops` links) by personalised PageRank, and returns the top entities (kind,
    community, supporting turn ids), relations (co_occurs, decides, blocks, fixes,
    replaces; each citing turns), their communities, and the supporting turns with
    provenance (exchange id, session, role, time, snippet). No model is involved.

    Use it for multi-hop questions (how things are connected); stenographer_query_history
    finds turns by their words. The graph is built by the operator's batch run
    (`stenographer graphrag extract`); turns recorded since are not in it yet.
    Read-only; text within 8000 characters. Errors: a missing session_id without
    cross_session. An unknown session or a query naming no known entity finds nothing.
    """
    out, trace = await _run(ctx, "graph_query", {
        "query": query, "session_id": session_id, "cross_session": cross_session,
        "hops": hops, "limit": limit}, inline=False)
    model = GraphQueryResult(text=out["text"], **out["graph_result"], trace=Trace(**trace))
    return _result(out["text"], model)


@mcp.resource(NOTES_URI, mime_type="text/markdown", security=SESSION_NAMES,
              description="Running notes of a session (as stenographer_get_brief).")
async def notes_resource(session_id: str, ctx: Context[AppLoader]) -> str:
    out, _ = await _run(ctx, "notes", {"session_id": session_id})
    return str(out["markdown"])


@mcp.resource(GUARD_URI, mime_type="text/markdown", security=SESSION_NAMES,
              description="Compaction briefing of a session (as stenographer_compact_guard).")
async def guard_resource(session_id: str, ctx: Context[AppLoader]) -> str:
    out, _ = await _run(ctx, "guard", {"session_id": session_id})
    return str(out["markdown"])


@mcp.resource("omega-stenographer://runs/{run_id}", mime_type="application/json",
              description="The stored stage trace of a graph run.")
async def run_resource(run_id: str, ctx: Context[AppLoader]) -> str:
    app = await ctx.request_context.lifespan_context.app()
    try:
        out, _ = app.run("trace", {"run_id": run_id})
    except NotFound as ex:
        raise ResourceNotFoundError(str(ex)) from None
    except StenoError as ex:
        raise ResourceNotFoundError(str(ex)) from None
    return json.dumps(out["trace"], ensure_ascii=False)


def serve_stdio() -> None:
    """Serve over stdio until end of input."""
    from stenographer.stdio import run_stdio

    anyio.run(run_stdio, mcp)


def main(argv: Sequence[str] | None = None) -> None:
    """Console script `omega-stenographer-mcp`: the stdio server that MCP hosts launch, or
    with `--http`/`--sse` the HTTP server (`omega-stenographer-mcp --help`)."""
    from stenographer.cli import main as cli_main
    from stenographer.serve_cli import build_server_parser

    cli_main(argv, build_server_parser())
