"""Structured outputs of the MCP tools (their JSON schemas are the tools' outputSchema)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field, WithJsonSchema

__all__ = [
    "AuditContract",
    "AuditReport",
    "BriefRef",
    "CaptureStatus",
    "Forgot",
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


class Forgot(BaseModel):
    text: str
    count: int = Field(description="Turns forgotten (each leaves a tombstone).")
    ids: list[int] = Field(description="Their ids (first 1000).")
    sessions: int
    briefs_rebuilt: list[int]
    briefs_removed: list[int]
    milestones_removed: int
    reindexed: int = Field(description="Later turns whose keyword entry was rebuilt.")
    traces_purged: int
    vacuumed: bool
    log_emptied: bool
    trace: TraceOut
