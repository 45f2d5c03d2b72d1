"""Structured outputs of the MCP tools (their JSON schemas are the tools' outputSchema)."""

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, WithJsonSchema

__all__ = [
    "AuditContract",
    "AuditReport",
    "BriefRef",
    "CaptureStatus",
    "Flag",
    "Forgot",
    "GraphQueryResult",
    "GuardResult",
    "HistoryPage",
    "Hit",
    "Ingested",
    "MilestoneMarked",
    "NotesResult",
    "Shutdown",
    "Stage",
    "Trace",
]


_JSON_TYPES = {"int": "integer", "str": "string", "float": "number", "bool": "boolean",
               "None": "null", "NoneType": "null"}


def _type_name(annotation: Any) -> str:
    """A field's type in JSON words: integer, string | null, list[string], ..."""
    text = annotation.__name__ if isinstance(annotation, type) else str(annotation)
    text = re.sub(r"\b(?:[a-z_]+\.)+(?=[A-Za-z_])", "", text)  # typing., module paths
    return re.sub(r"\b\w+\b", lambda m: _JSON_TYPES.get(m[0], m[0]), text)


def shape_only(model: type[BaseModel], what: str) -> WithJsonSchema:
    """The outputSchema of ``model`` by its required keys, not field by field.

    Clients validate structured content against the outputSchema on every call, and
    the SDK client's jsonschema pass descends into every property of every list item:
    for ten search hits that cost more (2-5 ms) than the search itself. A `required`
    list is checked without descending. The server still builds and checks the full
    model; the field types are listed in the description.
    """
    fields = ", ".join(f"{name} ({_type_name(info.annotation)})"
                       for name, info in model.model_fields.items())
    return WithJsonSchema({
        "type": "object",
        "required": [n for n, info in model.model_fields.items() if info.is_required()],
        "description": f"{what}: {{{fields}}}",
    })


class Stage(BaseModel):
    node: str
    step: int
    duration_ms: float
    writes: dict[str, str]
    error: str | None = None


class Trace(BaseModel):
    run_id: str = Field(
        description="Read it again later: resource omega-stenographer://runs/{run_id}")
    graph: str
    status: str
    duration_ms: float
    stages: list[Stage]


TraceOut = Annotated[Trace, shape_only(Trace, (
    "Stage trace of the graph run behind this call (each stage: {node, step, duration_ms, "
    "writes: {channel: the value's kind and size, never its text}, error: its kind}; "
    "read it again as "
    "omega-stenographer://runs/{run_id})"))]


class BriefRef(BaseModel):
    id: int
    tier: str
    turns: int


class Flag(BaseModel):
    signature: str = Field(description=(
        "NARRATIVE_RESCUE, MORAL_OVERRIDE, AUTHORITY_DRIFT or INTENT_INFERENCE"))
    span: str = Field(description="The matched text (at most 200 characters).")


class Shutdown(BaseModel):
    exchange_id: int = Field(description="The system turn that records the event.")
    event_id: int | str = Field(description="The event's id on the coordination bus.")
    source: str = Field(description="The tool that announced the shutdown.")
    at: str = Field(description="When the bus says it happened (ISO 8601, UTC).")
    new: bool
    acknowledged: bool = Field(description=(
        "The receipt was written on the bus (else a later ingest writes it)."))


FlagOut = Annotated[Flag, shape_only(Flag, "A flag")]
BriefRefOut = Annotated[BriefRef, shape_only(BriefRef, "A brief")]
ShutdownOut = Annotated[Shutdown, shape_only(Shutdown, "A shutdown event")]


class Ingested(BaseModel):
    text: str = Field(description="The reply line, also the first text content.")
    exchange_id: int
    session_id: str
    role: str
    chars: int
    duplicate: bool = Field(description="True when source_key was already captured.")
    decisions: list[str]
    blockers: list[str]
    compressed: list[BriefRefOut] = Field(description="Briefs made by this ingest, if any.")
    trace_id: str | None = Field(default=None, description=(
        "The turn's correlation id: the one sent, else the session's (VT-YYYYMMDD-xxxxxxxx)."))
    redacted: int = Field(default=0, description=(
        "Secrets replaced by [REDACTED:<kind>] before the turn was stored."))
    redacted_kinds: list[str] = Field(default_factory=list)
    nafe: list[str] = Field(default_factory=list, description=(
        "NAFE reasoning-drift signatures flagged in this assistant turn (heuristic)."))
    flags: list[FlagOut] = Field(default_factory=list)
    shutdowns: list[ShutdownOut] = Field(default_factory=list, description=(
        "CLAEG terminal-shutdown events of this session recorded from the coordination "
        "bus by this call, each as a system turn marked milestone TERMINAL_SHUTDOWN."))
    trace: TraceOut


class Hit(BaseModel):
    exchange_id: int
    session_id: str
    role: str
    created_at: str
    score: float
    match: Literal["keyword", "vector", "answer"] = Field(description=(
        "keyword: the keyword index matched a word of the query in this turn (or its "
        "neighbours' context or date); vector: only the vector lists ranked it (similar "
        "spelling or meaning, no word in common); answer: only the score the question "
        "before it lent it."))
    snippet: str
    decisions: list[str]
    blockers: list[str]
    brief_id: int | None = Field(description="The brief that holds this turn, if compressed.")
    trace_id: str | None = None
    flags: list[str] = Field(default_factory=list, description=(
        "NAFE signatures flagged in this turn, if any."))


HitOut = Annotated[Hit, shape_only(Hit, "One hit")]


class HistoryPage(BaseModel):
    text: str
    hits: list[HitOut]
    total: int = Field(description="Ranked candidates for this query (at most 200).")
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null at the end.")
    notes: list[str]
    trace: TraceOut


class NotesResult(BaseModel):
    markdown: str
    trace: TraceOut


class GuardResult(BaseModel):
    markdown: str
    brief_ids: list[int]
    vector_only: list[int] = Field(default_factory=list, description=(
        "Those of brief_ids whose source turns share no word with the query (ranked by "
        "vector similarity only)."))
    live_exchange_ids: list[int]
    trace: TraceOut


class MilestoneMarked(BaseModel):
    text: str
    exchange_id: int
    session_id: str
    label: str
    brief_id: int | None = Field(description="The brief that holds the turn, if compressed.")
    promoted: bool = Field(default=False, description=(
        "The brief was tier B and is tier A now that it holds a milestone."))
    trace: TraceOut


class CaptureStatus(BaseModel):
    text: str
    status: dict[str, object]
    trace: TraceOut


class AuditContract(BaseModel):
    name: str
    description: str
    passed: bool
    checked: int = Field(description="Records this contract examined.")
    violations: int
    ids: list[int] = Field(description=(
        "Violating turn (exchange) ids, first 100; run sequence numbers for "
        "trace_retention."))
    details: list[str] = Field(description="The first explanations, one per violation.")


class AuditReport(BaseModel):
    text: str
    passed: bool = Field(description="True when every contract holds.")
    scope: str
    session_id: str | None
    pages: int = Field(description="Bounded pages of evidence read.")
    contracts: list[AuditContract]
    trace: TraceOut


class ForgotGraph(BaseModel):
    sessions_rederived: int = Field(description=(
        "Sessions whose GraphRAG records were re-derived around the forgotten turns "
        "(the graph equals a rebuild without them); communities are recomputed by the "
        "next `graphrag extract`."))
    entities_removed: int
    edges_removed: int
    reset: bool = Field(description="The whole graph was reset instead (see the text).")


class Forgot(BaseModel):
    text: str
    count: int = Field(description="Turns forgotten (each leaves a tombstone).")
    ids: list[int] = Field(description="Their ids (first 1000).")
    sessions: int
    briefs_rebuilt: list[int]
    briefs_removed: list[int]
    milestones_removed: int
    reindexed: int = Field(description="Later turns whose keyword entry was rebuilt.")
    graph: ForgotGraph
    vacuumed: bool
    log_emptied: bool
    rewrite_pending: bool = Field(description=(
        "Another connection still holds the old pages: the file rewrite finishes in the "
        "background once it lets go (capture_status shows it pending, then done)."))
    trace: TraceOut


class GraphEntity(BaseModel):
    key: str = Field(description="Normalised name that merges aliases.")
    label: str
    kind: str = Field(description="url, file, issue, package, code, speaker, name or phrase.")
    score: float = Field(description="Personalised PageRank from the query's entities.")
    turns: int = Field(description="Turns that name it.")
    community: int | None
    turn_ids: list[int] = Field(description="Newest supporting turns (up to 5).")


class GraphRelation(BaseModel):
    source: str
    target: str
    kind: str = Field(description="co_occurs, decides, blocks, fixes or replaces.")
    turns: int
    turn_ids: list[int]


class GraphCommunity(BaseModel):
    id: int
    size: int
    label: str


class GraphTurn(BaseModel):
    exchange_id: int
    session_id: str
    role: str
    created_at: str
    score: float
    snippet: str
    brief_id: int | None


GraphEntityOut = Annotated[GraphEntity, shape_only(GraphEntity, "An entity")]
GraphRelationOut = Annotated[GraphRelation, shape_only(GraphRelation, "A relation")]
GraphCommunityOut = Annotated[GraphCommunity, shape_only(GraphCommunity, "A community")]
GraphTurnOut = Annotated[GraphTurn, shape_only(GraphTurn, "A supporting turn")]


class GraphQueryResult(BaseModel):
    text: str
    entities: list[GraphEntityOut]
    relations: list[GraphRelationOut]
    communities: list[GraphCommunityOut]
    turns: list[GraphTurnOut]
    trace: TraceOut
