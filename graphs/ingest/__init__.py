"""ingest: record one turn; ingest_batch: record many.

validate → read the session's CLAEG shutdown events not yet recorded from the
coordination bus → when there are any, record them (the claeg subgraph: each a system
turn, stored once; most turns find none and skip it) → redact secrets and hash the turn as
it will be stored → load the two turns before it (once, for both readers below) →
extract decisions/blockers → NAFE reasoning-drift flags (assistant turns) → extract the
vector → extract the keyword index's search fields (neighbouring turns' words, date) →
publish (turn, flags, keyword and vector index, one transaction) → compress when the
session reached STENO_TURN_LIMIT uncompressed turns → render the reply.

``ingest_batch`` (bulk ingest: capture, import) runs the same node functions once per
batch of turns (nodes.batch): ``batch_stages`` below, then a reply that counts them.
"""

from typing import Any

from graphs.claeg import DEFINITION as CLAEG
from graphs.compress import DEFINITION as COMPRESS
from graphs.definition import END, SCHEMA_VERSION, START, chain, channels

DEFINITION = {
    "schema_version": SCHEMA_VERSION,
    "name": "ingest",
    "channels": channels("request", "turn", "pending", "redacted", "previous", "decisions",
                         "blockers", "flags", "vector", "fields", "recorded",
                         "compression_due", "session_row", "reply",
                         append=("briefs", "shutdowns")),
    "nodes": {
        "validate": {"type": "checked_turn"},
        "bus_pending": {"type": "pending_shutdowns"},
        "bus": {"type": "subgraph", "definition": CLAEG,
                "input_map": {"turn": "caller", "pending": "pending"},
                "output_map": {"shutdowns": "shutdowns"}},
        "redact": {"type": "redacted_turn"},
        "previous": {"type": "previous_turns"},
        "signals": {"type": "turn_signals"},
        "flags": {"type": "nafe_flags"},
        "vector": {"type": "turn_vector"},
        "fields": {"type": "search_fields"},
        "store": {"type": "stored_turn"},
        "compress": {"type": "subgraph", "definition": COMPRESS,
                     "input_map": {"session_row": "session_row"},
                     "output_map": {"briefs": "briefs"}},
        "reply": {"type": "ingest_reply"},
    },
    "edges": chain(START, "validate", "bus_pending") + chain("bus", "redact")
    + chain("redact", "previous", "signals", "flags", "vector", "fields", "store")
    + chain("compress", "reply") + chain("reply", END),
    "conditional_edges": [
        # a subgraph costs the engine more than a stage: entered only with events to record
        {"from": "bus_pending", "condition": "has_pending",
         "routes": {"yes": "bus", "default": "redact"}},
        {"from": "store", "condition": "compression_due",
         "routes": {"yes": "compress", "default": "reply"}},
    ],
}


def batch_stages(prefix: str = "") -> tuple[dict[str, Any], list[dict[str, str]], str, str]:
    """The stages that store a batch of turns (the channel ``items``, nodes.batch), each
    through the ingest's own node functions: validate → each session's CLAEG shutdown
    events from the bus, as system turns → redact → the turns before each →
    decisions/blockers, NAFE flags, vector and search fields (one stage) → store (one
    transaction) → upkeep (the derived keyword index takes in a long queue; PostgreSQL's
    planner statistics are taken again once outgrown) → the events' receipts → compress
    the sessions left with a full batch. Returns the nodes (named with ``prefix``), the
    edges between them, the first stage and the last."""
    stages: list[tuple[str, dict[str, Any]]] = [
        ("validate", {"type": "per_turn", "node": "checked_turn"}),
        ("bus", {"type": "batch_shutdowns"}),
        ("redact", {"type": "per_turn", "node": "redacted_turn"}),
        ("previous", {"type": "batch_previous"}),
        # decisions/blockers, NAFE flags, vector, search fields, in turn on each turn
        # (nodes.batch.EXTRACT: the worker's part of them is one request)
        ("extract", {"type": "per_turn", "node": ["turn_signals", "nafe_flags",
                                                 "turn_vector", "search_fields"]}),
        ("store", {"type": "stored_turns"}),
        ("upkeep", {"type": "batch_upkeep"}),
        ("receipts", {"type": "batch_receipts"}),
        ("compress", {"type": "compressed_sessions"}),
    ]
    names = [prefix + name for name, _ in stages]
    nodes = {prefix + name: node for name, node in stages}
    return nodes, chain(*names), names[0], names[-1]


BATCH_CHANNELS = ("items", "due", "briefs", "sessions_compressed")
_batch_nodes, _batch_edges, _batch_first, _batch_last = batch_stages()

BATCH = {
    "schema_version": SCHEMA_VERSION,
    "name": "ingest_batch",
    "channels": channels("request", *BATCH_CHANNELS, "reply"),
    "nodes": {"items": {"type": "batch_items"}, **_batch_nodes,
              "reply": {"type": "batch_reply"}},
    "edges": chain(START, "items", _batch_first) + _batch_edges + chain(_batch_last, "reply", END),
}
