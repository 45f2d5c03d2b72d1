"""The registry: node types, route conditions, and every graph compiled once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from graphs import briefing as briefing_graph
from graphs import bus_publish as bus_publish_graph
from graphs import (
    capture,
    compress,
    contract_audit,
    forget,
    guard,
    ingest,
    migrate,
    milestone,
    notes,
    recover,
    search,
    status,
    trace,
)
from graphs import graphrag as graphrag_graphs
from graphs import inspector as inspector_graphs
from graphs import sessions as sessions_graph
from graphs import stats as stats_graph
from graphs import sync as sync_graphs
from graphs.hook_graphs import BRIEFING_CONDITIONS, BRIEFING_NODES
from graphs.runner import Graphs
from nodes.context import NodeFn
from nodes.evaluate_contracts.audit_contracts import audit_findings
from nodes.evaluate_contracts.audit_input import checked_audit
from nodes.evaluate_contracts.capture_input import checked_cursor_step, checked_transcript
from nodes.evaluate_contracts.forget_input import checked_forget
from nodes.evaluate_contracts.graph_input import (
    checked_community_ref,
    checked_graph_batch,
    checked_graph_export,
    checked_graph_query,
    graph_batch_contract,
)
from nodes.evaluate_contracts.inspector_input import (
    checked_brief_ref,
    checked_exchange_ref,
    checked_listing,
)
from nodes.evaluate_contracts.migrate_input import checked_migration, verified_turns
from nodes.evaluate_contracts.query_input import (
    checked_guard,
    checked_milestone,
    checked_notes,
    checked_query,
)
from nodes.evaluate_contracts.read_input import (
    checked_community_request,
    checked_trace_request,
)
from nodes.evaluate_contracts.sync_input import (
    checked_export,
    checked_import,
    checked_peer,
    verified_bundle,
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
from nodes.extract.migration_fields import migration_fields
from nodes.extract.query_terms import keyword_query
from nodes.extract.redaction import redacted_milestone, redacted_turn
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
from nodes.load_evidence.migration import migration_page, migration_plan
from nodes.load_evidence.neighbours import previous_turns
from nodes.load_evidence.session_view import guard_evidence, notes_evidence
from nodes.load_evidence.status import capture_status, recent_traces, stored_trace
from nodes.load_evidence.store_stats import store_stats
from nodes.load_evidence.sync_compression import overdue_session, recovered_session
from nodes.load_evidence.transcripts import transcript_batch, transcript_start
from nodes.publish.audit_report import audit_report
from nodes.publish.brief import claimed_brief
from nodes.publish.bundle_apply import applied_bundle
from nodes.publish.bundle_export import exported_bundle
from nodes.publish.bus_outbox import (
    bus_destination,
    bus_publish_reply,
    bus_totals,
    outgoing_events,
    published_events,
)
from nodes.publish.capture import advanced_cursor
from nodes.publish.delivery import delivered_bundle, fetched_bundle
from nodes.publish.embeddings import embedded_backlog
from nodes.publish.forget_reply import forget_reply
from nodes.publish.forgotten import forgotten_turns, scrubbed_store
from nodes.publish.graph_publish import (
    communities_text,
    community_text,
    exported_graph,
    extraction_tally,
    graph_query_text,
    graph_reset,
    graph_stats_text,
    published_communities,
    published_graph_batch,
)
from nodes.publish.ingest_reply import ingest_reply
from nodes.publish.listing_reply import sessions_text, stats_text
from nodes.publish.migration import copied_page, migration_reply
from nodes.publish.milestone import marked_milestone
from nodes.publish.search_reply import search_reply
from nodes.publish.session_reply import guard_markdown, notes_markdown
from nodes.publish.shutdown import acknowledged_shutdown
from nodes.publish.sync_batches import batches_reply, removed_spool, spooled_file, sync_totals
from nodes.publish.sync_cursor import (
    acked_delivery,
    acked_pull,
    failed_delivery,
    outgoing_bundle,
)
from nodes.publish.sync_reply import export_reply, import_reply
from nodes.publish.traces import persist_trace
from nodes.publish.turn import stored_turn

__all__ = ["CONDITIONS", "DEFINITIONS", "NODE_TYPES", "build_graphs"]

def _by_name(*fns: NodeFn) -> dict[str, NodeFn]:
    """Node types keyed by function name; two functions of one name are an error (the
    second would silently replace the first in every graph that names it)."""
    out: dict[str, NodeFn] = {}
    for fn in fns:
        if fn.__name__ in out:
            raise ValueError(f"two node functions are named {fn.__name__!r}: rename one")
        out[fn.__name__] = fn
    return out


NODE_TYPES: dict[str, NodeFn] = _by_name(
        checked_turn, previous_turns, turn_signals, turn_vector, stored_turn, ingest_reply,
        compression_batch, brief_draft, claimed_brief,
        checked_query, keyword_query, keyword_candidates, vector_candidates, fused_hits,
        hit_page, search_reply,
        checked_guard, guard_evidence, guard_markdown,
        checked_notes, notes_evidence, notes_markdown,
        checked_milestone, redacted_milestone, marked_milestone,
        capture_status, stored_trace, recent_traces,
        checked_listing, checked_exchange_ref, checked_brief_ref, checked_trace_request,
        session_list, exchange_detail, brief_detail, run_list,
        sessions_text, store_stats, stats_text,
        search_fields, provider_candidates, embedded_backlog, answered_hits,
        checked_audit, audit_scope, audit_batch, audit_findings, audit_report,
        checked_forget, forget_scope, forgotten_turns, scrubbed_store, forget_reply,
        redacted_turn, nafe_flags,
        shutdown_event, acknowledged_shutdown, bus_status,
        # GraphRAG (graphs/graphrag)
        checked_graph_batch, graph_batch_turns, graph_records, graph_batch_contract,
        published_graph_batch, extraction_tally, whole_graph_evidence, detected_communities,
        published_communities, checked_graph_query, graph_seeds, graph_neighbourhood,
        ranked_neighbourhood, graph_support, graph_query_text, graph_stats, graph_stats_text,
        community_list, communities_text, checked_community_ref, checked_community_request,
        community_evidence, community_sentences, community_text, checked_graph_export,
        export_rows, exported_graph, graph_reset,
        checked_transcript, transcript_start, transcript_batch,
        checked_cursor_step, advanced_cursor,
        checked_export, exported_bundle, export_reply,
        checked_import, verified_bundle, applied_bundle, overdue_session, import_reply,
        recovered_session,
        checked_peer, outgoing_bundle, delivered_bundle, acked_delivery, failed_delivery,
        fetched_bundle, acked_pull,
        spooled_file, removed_spool, sync_totals, batches_reply,
        bus_destination, outgoing_events, published_events, bus_totals, bus_publish_reply,
        # moving a store between backends (graphs/migrate)
        checked_migration, migration_plan, migration_page, verified_turns, migration_fields,
        copied_page, migration_reply,
        # the briefing a host hook prints at session start (graphs/briefing)
        *BRIEFING_NODES,
)

# Route conditions read only small channels that a node wrote for the purpose.
CONDITIONS: dict[str, Callable[[Any], str]] = {
    "compression_due": lambda s: "yes" if s.get("compression_due") else "no",
    "compress_again": lambda s: "again" if s.get("again") else "done",
    "search_mode": lambda s: str(s.get("query")["mode"]),
    "audit_more": lambda s: "more" if s.get("position") is not None else "done",
    "bus_event_found": lambda s: "yes" if s.get("event") is not None else "no",
    "has_session": lambda s: "yes" if s.get("session_row") is not None else "no",
    "has_outgoing": lambda s: "yes" if s.get("outgoing")["through"] is not None else "no",
    "delivered": lambda s: "ok" if s.get("delivery")["ok"] else "failed",
    "more_batches": lambda s: "more" if s.get("totals")["more"] else "done",
    "copy_left": lambda s: ("copy" if s.get("progress")["table"] is not None
                            and not s.get("stopped") else "done"),
    "copy_done": lambda s: "done" if s.get("reply")["done"] else "stopped",
    "turns_pending": lambda s: ("more" if s.get("published")["turns"]
                                and s.get("published")["remaining"] else "done"),
    "communities_stale": lambda s: "stale" if s.get("stats")["stale"] else "fresh",
    "wanted": lambda s: str(s.get("wanted")),  # one stored item, or a page of them
    "page_of_turns": lambda s: ("turns" if s.get("page")["table"] == "exchanges"
                                and s.get("page")["rows"] else "rows"),
    **BRIEFING_CONDITIONS,  # briefing_scope, and has_query (the guard's too)
}

DEFINITIONS: list[dict[str, Any]] = [
    ingest.DEFINITION, compress.DEFINITION, search.DEFINITION, guard.DEFINITION,
    notes.DEFINITION, milestone.DEFINITION, status.DEFINITION, trace.DEFINITION,
    *inspector_graphs.DEFINITIONS,
    sessions_graph.DEFINITION, stats_graph.DEFINITION,
    contract_audit.DEFINITION, forget.DEFINITION,
    *graphrag_graphs.DEFINITIONS,
    *capture.DEFINITIONS,
    *sync_graphs.DEFINITIONS,
    bus_publish_graph.DEFINITION,
    migrate.DEFINITION,
    briefing_graph.DEFINITION,
    recover.DEFINITION,
]

# Graphs whose loops may run longer than the engine's default step limit.
STEP_LIMITS: dict[str, int] = {"contract_audit": contract_audit.MAX_STEPS,
                               "bus_publish": bus_publish_graph.MAX_STEPS,
                               "recover": recover.MAX_STEPS,
                               "migrate": migrate.MAX_STEPS,
                               "graphrag_extract": graphrag_graphs.MAX_STEPS,
                               **dict.fromkeys(sync_graphs.LOOPING, sync_graphs.MAX_STEPS)}


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
