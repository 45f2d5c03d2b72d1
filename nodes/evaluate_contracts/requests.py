"""The request vocabulary: one pydantic model per operation.

Each model's fields are the operation's arguments, written once: their types, the
values they accept (``Literal``), their bounds and their descriptions. The MCP tool's
input schema is built from them (``stenographer/server.py``), the command's options are
generated from them (``stenographer/options.py``) and the graph's validate stage checks
the request with the same model (``parsed``) before the checks a schema cannot express
(valid Unicode, a time that parses, a session that exists).

The wording of what is valid (``valid_form``) is shared with the MCP server's argument
errors, so a bad value reads the same whichever door it came through.
"""

import json
import re
from functools import cache
from typing import Annotated, Any, Literal, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from nodes.publish.wording import counted
from store.errors import InvalidInput

__all__ = [
    "FLAG_FILTERS",
    "MAX_QUERY_CHARS",
    "MODES",
    "REQUESTS",
    "AuditRequest",
    "BusPublishRequest",
    "CommunityRequest",
    "ExportRequest",
    "ForgetRequest",
    "GraphExportRequest",
    "GraphExtractRequest",
    "GraphQueryRequest",
    "GraphResetRequest",
    "GuardRequest",
    "ImportRequest",
    "IngestRequest",
    "ListingRequest",
    "MigrateRequest",
    "MilestoneRequest",
    "NoArguments",
    "NotesRequest",
    "PeerRequest",
    "Request",
    "SearchRequest",
    "StatusRequest",
    "TraceRequest",
    "choices",
    "first_sentence",
    "parsed",
    "valid_form",
]

MAX_QUERY_CHARS = 2_000
MAX_ID = 2**63 - 1

Role = Literal["user", "assistant", "system", "tool"]
Mode = Literal["hybrid", "keyword", "semantic"]
# NAFE: any of the four signatures (nodes.extract.nafe.SIGNATURES; a test keeps them
# equal without compiling the extraction patterns here).
FlagFilter = Literal["NAFE", "NARRATIVE_RESCUE", "MORAL_OVERRIDE", "AUTHORITY_DRIFT",
                     "INTENT_INFERENCE"]


class Request(BaseModel):
    """An operation's arguments. Unknown keys are ignored (a graph's caller may pass
    more than the model names); every known one is checked strictly: no "yes" for
    true, no "10" for 10. A model's validator is built when it first checks a request
    (``defer_build``): a process checks few of the twenty, and the MCP server builds
    its tools' arguments from the fields alone."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True, defer_build=True)


SessionId = Annotated[str, Field(min_length=1, max_length=200, description=(
    "The conversation this turn belongs to: any stable string of 1-200 characters, "
    "e.g. the host's conversation id. Case-sensitive."))]
MaxChars = Annotated[int | None, Field(ge=500, le=200_000, description=(
    "Reply budget in characters (500-200000); default STENO_MAX_CHARS (8000)."))]


class IngestRequest(Request):
    role: Annotated[Role, Field(description="Who spoke: user, assistant, system or tool.")]
    content: Annotated[str, Field(min_length=1, description=(
        "The turn's full text, verbatim (1 to STENO_MAX_CONTENT_CHARS characters, "
        "default 1,000,000). Credentials in it (cloud keys, tokens, private keys, URL "
        "passwords, bearer headers, secret assignments) are stored as [REDACTED:<kind>] "
        "unless STENO_REDACT_SECRETS=off."))]
    session_id: SessionId
    trace_id: Annotated[str | None, Field(description=(
        "Optional correlation id in the form VT-YYYYMMDD-xxxxxxxx (8 digits, 8 lowercase "
        "hex digits), e.g. from omega_preload_context. Omitted: the session's trace id, "
        "created once per session in that form."))] = None
    source_key: Annotated[str | None, Field(max_length=500, description=(
        "Optional idempotency key (e.g. transcript file + line). A key already stored "
        "is not stored again: the reply says 'Already captured' with the existing id."))] = None
    created_at: Annotated[str | None, Field(description=(
        "When the turn happened, ISO 8601 (e.g. 2026-11-30T14:05:00Z; no zone means UTC). "
        "Default: now."))] = None
    trace: Annotated[bool, Field(description=(
        "Also return the stages of the stage trace (default false: its run id, status "
        "and duration only; the whole trace is the resource "
        "omega-stenographer://runs/{run_id})."))] = False


class NotesRequest(Request):
    session_id: SessionId
    max_chars: MaxChars = None


class GuardRequest(Request):
    session_id: SessionId
    query: Annotated[str | None, Field(max_length=MAX_QUERY_CHARS, description=(
        "What the next steps are about; the briefs whose source turns match it best "
        "are returned. Omit to get the newest briefs."))] = None
    top_k: Annotated[int | None, Field(ge=1, le=50, description=(
        "How many briefs (1-50); default STENO_TOP_K (5)."))] = None
    max_chars: MaxChars = None


class MilestoneRequest(Request):
    session_id: SessionId
    exchange_id: Annotated[int, Field(ge=1, le=MAX_ID, description=(
        "The #id of a turn of this session (from an ingest reply or a search hit)."))]
    label: Annotated[str, Field(min_length=1, max_length=200, description=(
        "Short name of the milestone, e.g. 'schema v2 shipped' (1-200 characters)."))]


class SearchRequest(Request):
    query: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description=(
        "What to find. A plain question works ('when did we drop Redis?'); FTS5 syntax "
        "is honoured when valid: \"exact phrase\", prefix*, a OR b, NEAR(a b, 5). "
        "Invalid syntax falls back to a word search and says so."))]
    session_id: Annotated[str | None, Field(max_length=200, description=(
        "Search this session. Required unless cross_session is true."))] = None
    cross_session: Annotated[bool, Field(description=(
        "Search every session (default false)."))] = False
    limit: Annotated[int, Field(ge=1, le=50, description="Hits per page (1-50).")] = 10
    cursor: Annotated[str | None, Field(max_length=500, description=(
        "next_cursor of the previous page, with the same query and filters."))] = None
    mode: Annotated[Mode, Field(description=(
        "hybrid (default): keyword BM25 and vectors fused; keyword; semantic."))] = "hybrid"
    role: Annotated[Literal["any", Role], Field(
        description="Only turns by this speaker.")] = "any"
    since: Annotated[str | None, Field(description=(
        "Only turns at or after this ISO 8601 time."))] = None
    until: Annotated[str | None, Field(description=(
        "Only turns before this ISO 8601 time."))] = None
    trace_id: Annotated[str | None, Field(max_length=40, description=(
        "Only turns with this trace id (VT-YYYYMMDD-xxxxxxxx), e.g. to correlate with "
        "other tools of the same task."))] = None
    flag: Annotated[FlagFilter | None, Field(description=(
        "Only assistant turns flagged with this NAFE reasoning-drift signature (NAFE: "
        "any of the four)."))] = None


class StatusRequest(Request):
    pass


class AuditRequest(Request):
    session_id: Annotated[str | None, Field(max_length=200, description=(
        "Audit this session only; omit to audit the whole store."))] = None


class ForgetRequest(Request):
    confirm: Annotated[bool, Field(description=(
        "Must be true: forgetting deletes turns for good and cannot be undone."))] = False
    exchange_ids: Annotated[list[Annotated[int, Field(ge=1, le=MAX_ID)]] | None, Field(
        max_length=10_000, description=(
            "Forget these turns (#ids from ingest replies or search hits)."))] = None
    session_id: Annotated[str | None, Field(max_length=200, description=(
        "Forget the turns of this session (alone: the whole session)."))] = None
    since: Annotated[str | None, Field(description=(
        "Forget turns recorded at or after this ISO 8601 time."))] = None
    until: Annotated[str | None, Field(description=(
        "Forget turns recorded before this ISO 8601 time."))] = None
    text: Annotated[str | None, Field(max_length=10_000, description=(
        "Forget every turn whose content contains this literal text (case-sensitive, "
        "at least 4 characters), e.g. a leaked secret. Milestone labels that contain it "
        "are deleted too (stage traces never hold text)."))] = None
    reason: Annotated[str | None, Field(max_length=500, description=(
        "Why (recorded in the tombstones); default 'forgotten on request'."))] = None
    vacuum: Annotated[bool, Field(description=(
        "Rewrite the file afterwards so that the text is not recoverable from it "
        "(default true; the command line's --no-vacuum skips it)."))] = True


class GraphQueryRequest(Request):
    query: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description=(
        "A question or names: 'what blocked the postgres migration?', 'sqlite-vec'. Its "
        "entities (names, files, issues, packages, code, phrases) are looked up."))]
    session_id: Annotated[str | None, Field(max_length=200, description=(
        "Use only links supported by turns of this session. Required unless "
        "cross_session is true."))] = None
    cross_session: Annotated[bool, Field(description=(
        "Use the links of every session (default false)."))] = False
    hops: Annotated[int, Field(ge=1, le=3, description=(
        "How far from the query's entities to look (1-3, default 2)."))] = 2
    limit: Annotated[int, Field(ge=1, le=50, description=(
        "Entities, relations and turns to return, each (1-50, default 10)."))] = 10


class TraceRequest(Request):
    run_id: Annotated[str | None, Field(max_length=100, description=(
        "Show this run's stage trace; omit to list the recent runs."))] = None
    limit: Annotated[int, Field(ge=1, le=1_000, description=(
        "Runs to list (1-1000, default 20)."))] = 20
    graph: Annotated[str | None, Field(max_length=64, description=(
        "List only runs of this graph."))] = None


class CommunityRequest(Request):
    community_id: Annotated[int | None, Field(ge=1, le=MAX_ID, description=(
        "Show this community: entities, relations, turns; omit to list communities."))] = None
    limit: Annotated[int, Field(ge=1, le=200, description=(
        "Communities per page (1-200, default 20)."))] = 20
    offset: Annotated[int, Field(ge=0, le=1_000_000_000, description=(
        "Skip this many communities (largest first)."))] = 0


class ListingRequest(Request):
    """A page of a listing (sessions, the inspector's runs and sessions)."""

    limit: Annotated[int | None, Field(ge=1, le=200, description=(
        "Items per page (1-200); default: the listing's own."))] = None
    offset: Annotated[int, Field(ge=0, le=1_000_000_000, description=(
        "Skip this many (newest first)."))] = 0
    graph: Annotated[str | None, Field(max_length=64, description=(
        "Only runs of this graph."))] = None
    all_graphs: Annotated[bool, Field(description=(
        "List the inspector's own reads too."))] = False


class ExportRequest(Request):
    path: Annotated[str, Field(min_length=1, max_length=4_096, description=(
        "The bundle file to write (must not exist unless overwrite)."))]
    session_id: Annotated[str | None, Field(max_length=200, description=(
        "Export this session only."))] = None
    overwrite: Annotated[bool, Field(description="Replace the file if it exists.")] = False
    after: Annotated[int, Field(ge=0, le=MAX_ID, description=(
        "Export the turns after this id."))] = 0
    limit: Annotated[int | None, Field(ge=1, le=10_000, description=(
        "At most this many records."))] = None


class ImportRequest(Request):
    path: Annotated[str, Field(min_length=1, max_length=4_096, description=(
        "The bundle file to read."))]
    peer: Annotated[str | None, Field(max_length=500, description=(
        "Who the bundle came from (recorded with re-linked turns); default the file's "
        "name."))] = None


class PeerRequest(Request):
    """A push to, or a pull from, another running instance."""

    url: Annotated[str, Field(min_length=1, max_length=2_000, description=(
        "The peer's base URL, e.g. http://127.0.0.1:8765."))]
    batch: Annotated[int | None, Field(ge=1, le=10_000, description=(
        "Turns per batch (default STENO_SYNC_BATCH, 500)."))] = None


class BusPublishRequest(Request):
    batch: Annotated[int | None, Field(ge=1, le=10_000, description=(
        "Events per bus transaction (default STENO_BUS_BATCH, 200)."))] = None


class MigrateRequest(Request):
    """Copy a whole store into another. The command opens both stores from ``to`` and
    ``source``; the graph copies between the stores its run is given."""

    to: Annotated[str, Field(min_length=1, max_length=4_096, description=(
        "postgresql://user@host:port/db, or a SQLite file (an existing directory: its "
        "steno.db); the password goes in ~/.pgpass or PGPASSWORD rather than on the "
        "command line"))]
    source: Annotated[str | None, Field(max_length=4_096, description=(
        "The store to copy (default: the configured one, STENO_DATABASE_URL or "
        "OMEGA_STENOGRAPHER_DIR/steno.db)."))] = None
    batch: Annotated[int, Field(ge=1, le=100_000, description=(
        "Turns per page (default 500)."))] = 500


class GraphExtractRequest(Request):
    session_id: Annotated[str | None, Field(max_length=200, description=(
        "Only this session's turns."))] = None
    since: Annotated[str | None, Field(max_length=100, description=(
        "Only turns at or after this ISO 8601 time (older pending turns of the sessions "
        "read are passed over)."))] = None
    batch_size: Annotated[int | None, Field(ge=1, le=100_000, description=(
        "Turns per batch (default STENO_GRAPHRAG_BATCH, 5000)."))] = None


class GraphExportRequest(Request):
    format: Annotated[Literal["graphml", "json"], Field(description=(
        "As GraphML (Gephi, yEd, Cytoscape) or JSON."))] = "graphml"


class GraphResetRequest(Request):
    confirm: Annotated[bool, Field(description=(
        "Must be true: the derived graph is deleted (the turns stay)."))] = False


class NoArguments(Request):
    """An operation that takes no argument (stats, graphrag stats, index rebuild)."""


# The request model of each graph that takes caller arguments through one of them.
REQUESTS: dict[str, type[Request]] = {
    "ingest": IngestRequest, "notes": NotesRequest, "guard": GuardRequest,
    "milestone": MilestoneRequest, "search": SearchRequest, "status": StatusRequest,
    "contract_audit": AuditRequest, "forget": ForgetRequest,
    "graph_query": GraphQueryRequest, "trace": TraceRequest,
    "graphrag_community": CommunityRequest, "sessions": ListingRequest,
    "sync_export": ExportRequest, "sync_import": ImportRequest,
    "sync_push": PeerRequest, "sync_pull": PeerRequest, "bus_publish": BusPublishRequest,
    "migrate": MigrateRequest, "graphrag_extract": GraphExtractRequest,
    "graphrag_export": GraphExportRequest, "graphrag_reset": GraphResetRequest,
    "stats": NoArguments, "graphrag_stats": NoArguments, "keyword_index_rebuild": NoArguments,
}


def choices(model: type[Request], name: str) -> tuple[Any, ...]:
    """The values a ``Literal`` field accepts, in order (``None`` left out)."""
    prop = _schema(model)["properties"][name]
    for option in prop.get("anyOf", [prop]):
        if "enum" in option:
            return tuple(option["enum"])
        if "const" in option:
            return (option["const"],)
    raise KeyError(f"{model.__name__}.{name} is not a Literal field")


MODES: tuple[str, ...] = get_args(Mode)
FLAG_FILTERS: tuple[str, ...] = get_args(FlagFilter)

R = TypeVar("R", bound=Request)


def parsed(model: type[R], request: dict[str, Any] | None) -> R:
    """``request`` checked against ``model``; a key given as None takes its default.

    Raises InvalidInput naming each wrong argument, what was wrong and what is valid.
    """
    given = {k: v for k, v in (request or {}).items() if v is not None}
    try:
        return model.model_validate(given)
    except ValidationError as ex:
        raise InvalidInput("; ".join(dict.fromkeys(
            _problem(model, e) for e in ex.errors(include_url=False)))) from None


def _problem(model: type[Request], error: Any) -> str:
    """One wrong argument in words: ``role='boss' is not valid; valid: user, ...``."""
    loc = error["loc"]
    name = str(loc[0]) if loc else "request"
    prop: dict[str, Any] = _schema(model)["properties"].get(name, {})
    if len(loc) > 1:  # an item of a list
        name += "[]"
        prop = _non_null(prop).get("items", {})
    value, kind = error.get("input"), error["type"]
    if kind == "missing":
        return f"{name} is required; valid: {valid_form(prop)}"
    if kind in ("literal_error", "enum"):
        note = " (NAFE: any of the four)" if name == "flag" else ""
        return (f"{name}={str(value)[:40]!r} is not valid; valid: "
                f"{', '.join(str(v) for v in _non_null(prop).get('enum', ()))}{note}")
    if kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        return f"{name}={value} is out of range; valid: {valid_form(prop)}"
    if kind == "string_too_long":
        limit = _non_null(prop).get("maxLength")
        return f"{name} is {len(value):,} characters; at most {limit:,} allowed"
    if kind == "too_long":
        limit = _non_null(prop).get("maxItems")
        return f"{name} has {counted(len(value), 'item')}; at most {limit:,} allowed"
    if kind == "string_too_short":
        return f"{name} must not be empty; valid: {valid_form(prop)}"
    return f"{name} must be {valid_form(prop)}{_described(model, loc)}"


def _described(model: type[Request], loc: Any) -> str:
    """The field's description, first sentence: it names a form the schema cannot (a
    trace id's, a time's)."""
    field = model.model_fields.get(str(loc[0])) if len(loc) == 1 else None
    text = " ".join(((field and field.description) or "").split())
    return f". {first_sentence(text)}" if text else ""


def first_sentence(text: str) -> str:
    """Up to the first full stop followed by a capital letter ("e.g. the" runs on)."""
    return re.split(r"(?<=[.!?])\s+(?=[A-Z])", text, maxsplit=1)[0].rstrip(".")


@cache
def _schema(model: type[Request]) -> dict[str, Any]:
    return model.model_json_schema()


def _non_null(prop: dict[str, Any]) -> dict[str, Any]:
    options = [p for p in prop.get("anyOf", [prop]) if p.get("type") != "null"]
    return options[0] if len(options) == 1 else prop


_PLURALS = {"integer": "integers", "string": "strings", "number": "numbers",
            "boolean": "booleans"}


def valid_form(prop: dict[str, Any]) -> str:
    """The values a JSON schema property accepts, in words ("an integer from 1 to 50",
    "one of "hybrid", "keyword", "semantic"", "a string of at most 200 characters")."""
    if "anyOf" in prop:
        forms = [valid_form(p) for p in prop["anyOf"] if p.get("type") != "null"]
        nullable = len(forms) < len(prop["anyOf"])
        return " or ".join(forms) + (" or null" if nullable else "")
    if "enum" in prop:
        return "one of " + ", ".join(json.dumps(v) for v in prop["enum"])
    if "const" in prop:
        return json.dumps(prop["const"])
    kind = prop.get("type")
    if kind == "string":
        return "a string" + _bounds(prop, "minLength", "maxLength", " characters", " of ")
    if kind in ("integer", "number"):
        return f"{'an integer' if kind == 'integer' else 'a number'}" + _bounds(
            prop, "minimum", "maximum", "", " ")
    if kind == "boolean":
        return "true or false"
    if kind == "array":
        items = prop.get("items", {})
        noun = _PLURALS.get(items.get("type", ""), "items")
        return f"a list of {noun}" + _bounds(prop, "minItems", "maxItems", " items", " (", ")")
    if kind == "object":
        return "an object"
    return "any JSON value"


def _bounds(prop: dict[str, Any], low_key: str, high_key: str, unit: str, lead: str,
            tail: str = "") -> str:
    low, high = prop.get(low_key), prop.get(high_key)
    last = high if high is not None else low
    if last == 1:
        unit = unit.removesuffix("s")  # "at least 1 character"
    if low is not None and high is not None:
        words = f"from {low} to {high}{unit}" if not unit else f"{low}-{high}{unit}"
    elif low is not None:
        words = f"at least {low}{unit}"
    elif high is not None:
        words = f"at most {high}{unit}"
    else:
        return ""
    return f"{lead}{words}{tail}"
