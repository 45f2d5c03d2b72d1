"""ingest: record one turn.

validate → record the session's CLAEG shutdown events from the coordination bus (the
claeg subgraph: each a system turn, stored once) → redact secrets and hash the turn as
it will be stored → load the two turns before it (once, for both readers below) →
extract decisions/blockers → NAFE reasoning-drift flags (assistant turns) → extract the
vector → extract the keyword index's search fields (neighbouring turns' words, date) →
publish (turn, flags, keyword and vector index, one transaction) → compress when the
session reached STENO_TURN_LIMIT uncompressed turns → render the reply.
"""

from graphs.claeg import DEFINITION as CLAEG
from graphs.compress import DEFINITION as COMPRESS
from graphs.definition import END, SCHEMA_VERSION, START, chain, channels

DEFINITION = {
    "schema_version": SCHEMA_VERSION,
    "name": "ingest",
    "channels": channels("request", "turn", "redacted", "previous", "decisions", "blockers",
                         "flags", "vector", "fields", "recorded", "compression_due",
                         "session_row", "reply", append=("briefs", "shutdowns")),
    "nodes": {
        "validate": {"type": "checked_turn"},
        "bus": {"type": "subgraph", "definition": CLAEG, "input_map": {"turn": "caller"},
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
    "edges": chain(START, "validate", "bus", "redact", "previous", "signals", "flags", "vector",
                   "fields", "store")
    + chain("compress", "reply") + chain("reply", END),
    "conditional_edges": [
        {"from": "store", "condition": "compression_due",
         "routes": {"yes": "compress", "default": "reply"}},
    ],
}
