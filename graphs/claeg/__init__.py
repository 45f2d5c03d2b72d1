"""claeg: record the ingesting session's CLAEG terminal-shutdown events from the
coordination bus (a subgraph of ingest).

next unacknowledged event of the session, as a system turn → the ingest's own stages
for it (redact, the turns before it, decisions/blockers, flags, vector, search fields,
store under the event's source key with its TERMINAL_SHUTDOWN milestone) → write the
receipt on the bus → next event, until none is left. A missing, locked or corrupt bus
yields no event: the ingest goes on.
"""

from graphs.definition import END, SCHEMA_VERSION, START, chain, channels

DEFINITION = {
    "schema_version": SCHEMA_VERSION,
    "name": "claeg",
    "channels": channels("caller", "pending", "event", "turn", "redacted", "previous",
                         "decisions", "blockers", "flags", "vector", "fields", "recorded",
                         "compression_due", "session_row", append=("shutdowns",)),
    "nodes": {
        "bus_event": {"type": "shutdown_event"},
        "bus_redact": {"type": "redacted_turn"},
        "bus_previous": {"type": "previous_turns"},
        "bus_signals": {"type": "turn_signals"},
        "bus_flags": {"type": "nafe_flags"},
        "bus_vector": {"type": "turn_vector"},
        "bus_fields": {"type": "search_fields"},
        "bus_store": {"type": "stored_turn"},
        "bus_receipt": {"type": "acknowledged_shutdown"},
    },
    "edges": chain(START, "bus_event")
    + chain("bus_redact", "bus_previous", "bus_signals", "bus_flags", "bus_vector",
            "bus_fields", "bus_store", "bus_receipt", "bus_event"),
    "conditional_edges": [
        {"from": "bus_event", "condition": "bus_event_found",
         "routes": {"yes": "bus_redact", "default": END}},
    ],
}
