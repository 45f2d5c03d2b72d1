"""The registry: node types, route conditions, and every graph compiled once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from graphs import (
    compress,
    contract_audit,
    forget,
    guard,
    ingest,
    milestone,
    notes,
    search,
    status,
    trace,
)
from graphs import graphrag as graphrag_graphs
from graphs import inspector as inspector_graphs
from graphs import sessions as sessions_graph
from graphs import stats as stats_graph
from graphs.runner import Graphs
from nodes.context import NodeFn
from nodes.evaluate_contracts.audit_contracts import audit_findings
from nodes.evaluate_contracts.audit_input import checked_audit
from nodes.evaluate_contracts.forget_input import checked_forget
from nodes.evaluate_contracts.graph_input import (
    checked_community_ref,
    checked_export,
    checked_graph_batch,
    checked_graph_query,
    graph_batch_contract,
)
from nodes.evaluate_contracts.inspector_input import (
    checked_brief_ref,
    checked_exchange_ref,
    checked_listing,
)
from nodes.evaluate_contracts.query_input import (
    checked_guard,
    checked_milestone,
    checked_notes,
    checked_query,
)
from nodes.evaluate_contracts.turn_input import checked_turn
from nodes.extract.brief import brief_draft
from nodes.extract.fusion import fused_hits
from nodes.extract.graph_records import graph_records
from nodes.extract.graph_views import (
    community_sentences,
    detected_communities,
    ranked_neighbourhood,
)
from nodes.extract.query_terms import keyword_query
from nodes.extract.redaction import redacted_turn
from nodes.extract.search_fields import search_fields
from nodes.extract.turn_flags import nafe_flags
from nodes.extract.turn_signals import turn_signals
from nodes.extract.vectors import turn_vector
from nodes.load_evidence.answers import answered_hits
from nodes.load_evidence.audit_evidence import audit_batch, audit_scope
from nodes.load_evidence.bus_events import shutdown_event
from nodes.load_evidence.bus_status import bus_status
from nodes.load_evidence.compression import compression_batch
from nodes.load_evidence.forget_scope import forget_scope
from nodes.load_evidence.graph_evidence import (
    community_evidence,
    community_list,
    export_rows,
    graph_batch_turns,
    graph_neighbourhood,
    graph_seeds,
    graph_stats,
    graph_support,
    whole_graph_evidence,
)
from nodes.load_evidence.hit_rows import hit_page
from nodes.load_evidence.hits import keyword_candidates, provider_candidates, vector_candidates
from nodes.load_evidence.inspector import brief_detail, exchange_detail, run_list, session_list
from nodes.load_evidence.neighbours import previous_turns
from nodes.load_evidence.session_view import guard_evidence, notes_evidence
from nodes.load_evidence.status import capture_status, recent_traces, stored_trace
from nodes.load_evidence.store_stats import store_stats
from nodes.publish.audit_report import audit_report
from nodes.publish.brief import claimed_brief
from nodes.publish.embeddings import embedded_backlog
from nodes.publish.forget_reply import forget_reply
from nodes.publish.forgotten import forgotten_turns, scrubbed_store
from nodes.publish.graph_publish import (
    communities_text,
    community_text,
    exported_graph,
    graph_query_text,
    graph_reset,
    graph_stats_text,
    published_communities,
    published_graph_batch,
)
from nodes.publish.ingest_reply import ingest_reply
from nodes.publish.listing_reply import sessions_text, stats_text
from nodes.publish.milestone import marked_milestone
from nodes.publish.search_reply import search_reply
from nodes.publish.session_reply import guard_markdown, notes_markdown
from nodes.publish.shutdown import acknowledged_shutdown
from nodes.publish.traces import persist_trace
from nodes.publish.turn import stored_turn

__all__ = ["CONDITIONS", "DEFINITIONS", "NODE_TYPES", "build_graphs"]

NODE_TYPES: dict[str, NodeFn] = {
    fn.__name__: fn
    for fn in (
        checked_turn, previous_turns, turn_signals, turn_vector, stored_turn, ingest_reply,
        compression_batch, brief_draft, claimed_brief,
        checked_query, keyword_query, keyword_candidates, vector_candidates, fused_hits,
        hit_page, search_reply,
        checked_guard, guard_evidence, guard_markdown,
        checked_notes, notes_evidence, notes_markdown,
        checked_milestone, marked_milestone,
        capture_status, stored_trace, recent_traces,
        checked_listing, checked_exchange_ref, checked_brief_ref,
        session_list, exchange_detail, brief_detail, run_list,
        sessions_text, store_stats, stats_text,
        search_fields, provider_candidates, embedded_backlog, answered_hits,
        checked_audit, audit_scope, audit_batch, audit_findings, audit_report,
        checked_forget, forget_scope, forgotten_turns, scrubbed_store, forget_reply,
        redacted_turn, nafe_flags,
        shutdown_event, acknowledged_shutdown, bus_status,
        # GraphRAG (graphs/graphrag)
        checked_graph_batch, graph_batch_turns, graph_records, graph_batch_contract,
        published_graph_batch, whole_graph_evidence, detected_communities,
        published_communities, checked_graph_query, graph_seeds, graph_neighbourhood,
        ranked_neighbourhood, graph_support, graph_query_text, graph_stats, graph_stats_text,
        community_list, communities_text, checked_community_ref, community_evidence,
        community_sentences, community_text, checked_export, export_rows, exported_graph,
        graph_reset,
    )
}

# Route conditions read only small channels that a node wrote for the purpose.
CONDITIONS: dict[str, Callable[[Any], str]] = {
    "compression_due": lambda s: "yes" if s.get("compression_due") else "no",
    "compress_again": lambda s: "again" if s.get("again") else "done",
    "search_mode": lambda s: str(s.get("query")["mode"]),
    "has_query": lambda s: "yes" if s.get("query")["text"] is not None else "no",
    "audit_more": lambda s: "more" if s.get("position") is not None else "done",
    "bus_event_found": lambda s: "yes" if s.get("event") is not None else "no",
}

DEFINITIONS: list[dict[str, Any]] = [
    ingest.DEFINITION, compress.DEFINITION, search.DEFINITION, guard.DEFINITION,
    notes.DEFINITION, milestone.DEFINITION, status.DEFINITION, trace.DEFINITION, trace.RUNS,
    *inspector_graphs.DEFINITIONS,
    sessions_graph.DEFINITION, stats_graph.DEFINITION,
    contract_audit.DEFINITION, forget.DEFINITION,
    *graphrag_graphs.DEFINITIONS,
]

# Graphs whose loops may run longer than the engine's default step limit.
STEP_LIMITS: dict[str, int] = {"contract_audit": contract_audit.MAX_STEPS}


def build_graphs() -> Graphs:
    """Register every node type and condition and compile every graph (at start-up)."""
    graphs = Graphs(trace_sink=persist_trace)
    for type_name, fn in NODE_TYPES.items():
        graphs.node_type(type_name, fn)
    for name, condition in CONDITIONS.items():
        graphs.condition(name, condition)
    for definition in DEFINITIONS:
        graphs.compile(definition, STEP_LIMITS.get(definition["name"]))
    return graphs
