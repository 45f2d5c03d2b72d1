"""Structured outputs of the MCP tools (their JSON schemas are the tools' outputSchema)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field, WithJsonSchema

__all__ = [
    "BriefRef",
    "CaptureStatus",
    "Flag",
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
    trace_id: str | None = Field(default=None, description=(
        "The turn's correlation id: the one sent, else the session's (VT-YYYYMMDD-xxxxxxxx)."))
    redacted: int = Field(default=0, description=(
        "Secrets replaced by [REDACTED:<kind>] before the turn was stored."))
    redacted_kinds: list[str] = Field(default_factory=list)
    nafe: list[str] = Field(default_factory=list, description=(
        "NAFE reasoning-drift signatures flagged in this assistant turn (heuristic)."))
    flags: list[Flag] = Field(default_factory=list)
    shutdowns: list[Shutdown] = Field(default_factory=list, description=(
        "CLAEG terminal-shutdown events of this session recorded from the coordination "
        "bus by this call, each as a system turn marked milestone TERMINAL_SHUTDOWN."))
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
    flags: list[str] = Field(default_factory=list, description=(
        "NAFE signatures flagged in this turn, if any."))


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
