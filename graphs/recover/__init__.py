"""recover: compress what a process killed between an ingest and its compression left.

the next session holding a full batch of uncompressed turns → note it → load its batch →
extract the brief → claim the turns; go again while the session still holds a full
batch, then on to the next such session, until there is none. A server runs it once at
start (``App.finish_compression``); the loop is the one ``sync_import`` runs after an
import.
"""

from graphs.definition import END, SCHEMA_VERSION, START, chain, channels

__all__ = ["DEFINITION", "MAX_STEPS"]

# One pass per session and per brief; a store can hold many sessions left overdue.
MAX_STEPS = 10_000_000

DEFINITION = {
    "schema_version": SCHEMA_VERSION,
    "name": "recover",
    "channels": channels("request", "after_session", "session_row", "sessions_compressed",
                         "batch", "draft", "rounds", "again", "briefs",
                         append=("recovered",)),
    "nodes": {
        "overdue": {"type": "overdue_session"},
        "note": {"type": "recovered_session"},
        "batch": {"type": "compression_batch"},
        "draft": {"type": "brief_draft"},
        "claim": {"type": "claimed_brief"},
    },
    "edges": chain(START, "overdue") + chain("note", "batch", "draft", "claim"),
    "conditional_edges": [
        {"from": "overdue", "condition": "has_session",
         "routes": {"yes": "note", "default": END}},
        {"from": "claim", "condition": "compress_again",
         "routes": {"again": "batch", "default": "overdue"}},
    ],
}
