"""Structured outputs of the MCP tools (their JSON schemas are the tools' outputSchema)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field, WithJsonSchema

__all__ = [
    "BriefRef",
    "CaptureStatus",
    "GraphQueryResult",
    "GuardResult",
    "HistoryPage",
    "Hit",
    "Ingested",
    "MilestoneMarked",
    "NotesResult",
    "Stage",
    "Trace",
]


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


# The trace is built and checked as a `Trace` on the server, but published in the
# outputSchema as a plain object: clients validate structured content against the schema
# on every call, and the SDK client's jsonschema pass over the nested stage models cost
# more per call (several ms) than the graph run itself. The shape is documented here.
TraceOut = Annotated[Trace, WithJsonSchema({
    "type": "object",
    "description": (
        "Stage trace of the graph run behind this call: {run_id, graph, status, "
        "duration_ms, stages: [{node, step, duration_ms, writes: {channel: summary}, "
        "error}]}. Read it again later as omega-stenographer://runs/{run_id}."),
})]


class BriefRef(BaseModel):
    id: int
    tier: str
    turns: int


class Ingested(BaseModel):
    text: str = Field(description="The reply line, also the first text content.")
    exchange_id: int
    session_id: str
    role: str
    chars: int
    duplicate: bool = Field(description="True when source_key was already captured.")
    decisions: list[str]
    blockers: list[str]
    compressed: list[BriefRef] = Field(description="Briefs made by this ingest, if any.")
    trace_id: str | None = None
    trace: TraceOut


class Hit(BaseModel):
    exchange_id: int
    session_id: str
    role: str
    created_at: str
    score: float
    snippet: str
    decisions: list[str]
    blockers: list[str]
    brief_id: int | None = Field(description="The brief that holds this turn, if compressed.")
    trace_id: str | None = None


class HistoryPage(BaseModel):
    text: str
    hits: list[Hit]
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
    live_exchange_ids: list[int]
    trace: TraceOut


class MilestoneMarked(BaseModel):
    text: str
    exchange_id: int
    session_id: str
    label: str
    brief_id: int | None
    trace: TraceOut


class CaptureStatus(BaseModel):
    text: str
    status: dict[str, object]
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


class GraphQueryResult(BaseModel):
    text: str
    entities: list[GraphEntity]
    relations: list[GraphRelation]
    communities: list[GraphCommunity]
    turns: list[GraphTurn]
    trace: TraceOut
