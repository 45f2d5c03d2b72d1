"""The MCP server: the tools, three resource templates (and the recent sessions' notes
listed as resources), stdio by default.

Each tool is thin: its typed signature is the input schema, its docstring the
description; it runs one named graph and returns the result with the stage trace.
"""

import inspect
import json
import logging
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.server.mcpserver.resources import ResourceSecurity
from mcp.shared.uri_template import UriTemplate
from mcp.types import Annotations, CallToolResult, Resource, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from nodes.evaluate_contracts.requests import (
    AuditRequest,
    ForgetRequest,
    GraphQueryRequest,
    GuardRequest,
    IngestRequest,
    MilestoneRequest,
    NotesRequest,
    Request,
    SearchRequest,
    StatusRequest,
)
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
from stenographer.serve_cli import main as serve_main
from stenographer.serve_cli import resume_gc
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


WARM_IDLE_S = 0.25  # no tool call started for this long: the server warms up


class AppLoader:
    """Opens the application on a background thread so that the MCP handshake does
    not wait for the graph engine, numpy and the store (cold start); the first tool
    call waits for it if it is not ready yet. Once the application is open and no call
    has started for ``WARM_IDLE_S``, another thread warms it up (``App.warm``): the
    first search of a session then finds its graph compiled and the store's search
    structures loaded. Waiting for a pause keeps that work off the first calls, which
    hosts make right after the handshake."""

    def __init__(self) -> None:
        self._app: App | None = None
        # Scheduler jobs: a push when STENO_SYNC_PEER is set, publishing when a bus is
        self._jobs: list[Scheduler] = []
        self._error: BaseException | None = None
        self._ready = threading.Event()
        self._last_call = 0.0  # time.monotonic() when a tool call last asked for the app
        self._closing = threading.Event()
        self._warming: threading.Thread | None = None
        threading.Thread(target=self._open, name="steno-open", daemon=True).start()

    def _open(self) -> None:
        try:
            from stenographer.app import open_app

            self._app = open_app()
        except BaseException as ex:  # reported to every caller, never swallowed
            self._error = ex
        else:
            # Paused while the stdio server started (stenographer.serve_cli): what runs
            # from here on (a recovery, the background jobs) is collected as usual.
            resume_gc()
            if self._app.store.read_only:  # nothing that writes runs in the background
                print(f"omega-stenographer: {self._app.store.location} is read-only: "
                      "serving reads; calls that write are refused", file=sys.stderr)
                return
            self._app.store.serves()  # keep what this process's searches share
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
            resume_gc()  # if the application could not be opened (else resumed above)
            if self._app is not None:  # started before close() can look for it
                self._last_call = max(self._last_call, time.monotonic())
                warming = threading.Thread(target=self._warm, name="steno-warm", daemon=True)
                warming.start()
                self._warming = warming
            self._ready.set()

    def _warm(self) -> None:
        """``App.warm`` once no tool call has started for ``WARM_IDLE_S`` (or never, if
        the server closes first); a failure is reported and leaves the first search to
        load what it needs, as without it."""
        assert self._app is not None
        while True:
            wait = self._last_call + WARM_IDLE_S - time.monotonic()
            if wait <= 0:
                break
            if self._closing.wait(wait):
                return
        try:
            self._app.warm()
        except Exception as ex:
            print(f"omega-stenographer: not warmed up for the first search: {ex}",
                  file=sys.stderr)

    async def app(self) -> "App":
        self._last_call = time.monotonic()
        if not self._ready.is_set():
            await anyio.to_thread.run_sync(self._ready.wait)
        if self._error is not None:
            raise ToolError(_opening_failure(self._error))
        assert self._app is not None
        return self._app

    def close(self) -> None:
        self._ready.wait()
        self._closing.set()
        if self._warming is not None:  # the store stays open until it has finished
            self._warming.join()
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
    ).model_dump(by_alias=True, mode="json", exclude_none=True) for s in out["reply"]["sessions"]]
    wire = (result.model_dump(by_alias=True, mode="json", exclude_none=True)
            if isinstance(result, BaseModel) else dict(result or {}))
    return {**wire, "resources": [*wire.get("resources", []), *listed]}


mcp: MCPServer[AppLoader] = StenoServer("omega-stenographer", instructions=INSTRUCTIONS,
                                       version=__version__, lifespan=lifespan,
                                       middleware=[_session_notes])

Tool = TypeVar("Tool", bound=Callable[..., Any])


def _takes(model: type[Request], *, leave_out: tuple[str, ...] = ()
           ) -> Callable[[Tool], Tool]:
    """Give a tool ``async def tool(ctx, **request)`` the fields of ``model`` as its
    parameters: the SDK builds the tool's input schema from the signature, so the
    arguments stay flat, each with its type, bounds and description, and the handler
    receives them as keyword arguments. ``leave_out``: fields only the command line
    sets."""

    def wrap(fn: Tool) -> Tool:
        kw = inspect.Parameter.KEYWORD_ONLY
        params = [inspect.Parameter(
            name, kw, annotation=Annotated[(info.annotation, *info.metadata,
                                            Field(description=info.description))],
            default=inspect.Parameter.empty if info.is_required() else info.default)
            for name, info in model.model_fields.items() if name not in leave_out]
        params.append(inspect.Parameter("ctx", kw, annotation=Context[AppLoader]))
        returns = inspect.signature(fn, eval_str=True).return_annotation
        fn.__signature__ = inspect.Signature(params, return_annotation=returns)  # type: ignore[attr-defined]
        return fn
    return wrap


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
@_takes(IngestRequest)
async def ingest_exchange(ctx: Context[AppLoader], **request: Any
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
    stages_wanted = bool(request.pop("trace", False))
    out, run = await _run(ctx, "ingest", request,
                          inline=len(request["content"]) <= INLINE_CHARS)
    reply = out["reply"]
    stages = run["stages"] if stages_wanted else []
    return _result(reply["text"], Ingested(**reply, trace=Trace(**{**run, "stages": stages})))


@mcp.tool(name="stenographer_get_brief", annotations=READ)
@_takes(NotesRequest)
async def get_brief(ctx: Context[AppLoader], **request: Any
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
    out, trace = await _run(ctx, "notes", request)
    reply = out["reply"]
    return _result(reply["markdown"], NotesResult(markdown=reply["markdown"],
                                                  trace=Trace(**trace)))


@mcp.tool(name="stenographer_compact_guard", annotations=READ)
@_takes(GuardRequest)
async def compact_guard(ctx: Context[AppLoader], **request: Any
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
    out, trace = await _run(ctx, "guard", request)
    reply = out["reply"]
    return _result(reply["markdown"], GuardResult(**reply, trace=Trace(**trace)))


@mcp.tool(name="stenographer_mark_milestone", annotations=ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True,
    open_world_hint=False))
@_takes(MilestoneRequest)
async def mark_milestone(ctx: Context[AppLoader], **request: Any
                         ) -> Annotated[CallToolResult, MilestoneMarked]:
    """Flag a turn as a milestone: tier-A priority, always listed in the running notes,
    and the brief that holds it is tier A. A turn already compressed has its brief made
    again at once, as tier A listing the milestone (the reply ends `(already in brief
    <id>, now tier A)` when that promoted it). Marking the same turn again replaces its
    label, in the brief too. Errors: an exchange id that does not exist or belongs to
    another session.
    """
    out, trace = await _run(ctx, "milestone", request)
    reply = out["reply"]
    return _result(reply["text"], MilestoneMarked(**reply, trace=Trace(**trace)))


@mcp.tool(name="stenographer_query_history", annotations=READ)
@_takes(SearchRequest)
async def query_history(ctx: Context[AppLoader], **request: Any
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
    out, trace = await _run(ctx, "search", request)
    reply = out["reply"]
    return _result(reply["text"], HistoryPage(**reply, trace=Trace(**trace)))


@mcp.tool(name="stenographer_capture_status", annotations=READ)
@_takes(StatusRequest)
async def capture_status(ctx: Context[AppLoader], **request: Any
                         ) -> Annotated[CallToolResult, CaptureStatus]:
    """Automatic capture progress (transcript watchers: files, offsets, last success,
    errors), delivery status (sync outbox: pending, delivered, last error), the
    coordination bus (state: ok, missing, locked, corrupt, unusable; shutdown events
    unacknowledged and recorded; this process's last error and back-off; turns
    published as STENO_EXCHANGE events: delivered, pending, last success and error) and store
    counts (sessions, exchanges, briefs, size; the file rewrite after a forget: pending
    or done). Read-only; about 1.5 KB.
    """
    out, trace = await _run(ctx, "status", request)
    reply = out["reply"]
    return _result(reply["text"], CaptureStatus(**reply, trace=Trace(**trace)))


@mcp.tool(name="stenographer_audit", annotations=READ)
@_takes(AuditRequest)
async def audit(ctx: Context[AppLoader], **request: Any
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
    out, trace = await _run(ctx, "contract_audit", request, inline=False)
    report = out["reply"]
    return _result(report["text"], AuditReport(**report, trace=Trace(**trace)))


@mcp.tool(name="stenographer_forget", annotations=ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True,
    open_world_hint=False))
@_takes(ForgetRequest, leave_out=("vacuum",))
async def forget(ctx: Context[AppLoader], **request: Any
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
    out, trace = await _run(ctx, "forget", request, inline=False)
    reply = out["reply"]
    return _result(reply["text"], Forgot(**reply, trace=Trace(**trace)))


@mcp.tool(name="stenographer_graph_query", annotations=READ)
@_takes(GraphQueryRequest)
async def graph_query(ctx: Context[AppLoader], **request: Any
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
    out, trace = await _run(ctx, "graph_query", request, inline=False)
    reply = out["reply"]
    return _result(reply["text"], GraphQueryResult(**reply, trace=Trace(**trace)))


@mcp.resource(NOTES_URI, mime_type="text/markdown", security=SESSION_NAMES,
              description="Running notes of a session (as stenographer_get_brief).")
async def notes_resource(session_id: str, ctx: Context[AppLoader]) -> str:
    out, _ = await _run(ctx, "notes", {"session_id": session_id})
    return str(out["reply"]["markdown"])


@mcp.resource(GUARD_URI, mime_type="text/markdown", security=SESSION_NAMES,
              description="Compaction briefing of a session (as stenographer_compact_guard).")
async def guard_resource(session_id: str, ctx: Context[AppLoader]) -> str:
    out, _ = await _run(ctx, "guard", {"session_id": session_id})
    return str(out["reply"]["markdown"])


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
    return json.dumps(out["reply"]["trace"], ensure_ascii=False)


def serve_stdio() -> None:
    """Serve over stdio until end of input."""
    from stenographer.stdio import run_stdio

    try:
        anyio.run(run_stdio, mcp)
    finally:
        resume_gc()  # if it ended before the application opened


def main(argv: Sequence[str] | None = None) -> None:
    """`omega-stenographer-mcp` (``stenographer.serve_cli.main``, which the console
    script runs without importing this module and the MCP SDK first)."""
    serve_main(argv)
