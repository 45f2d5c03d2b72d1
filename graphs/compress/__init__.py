"""compress: fold a session's oldest uncompressed turns into a provenance-tracked brief.

load the batch → extract the brief's text → claim the turns atomically; go again while
enough uncompressed turns remain (or another process won the claim).
"""

from graphs.definition import END, SCHEMA_VERSION, START, chain, channels

DEFINITION = {
    "schema_version": SCHEMA_VERSION,
    "name": "compress",
    "channels": channels("session_row", "batch", "draft", "rounds", "again",
                         append=("briefs",)),
    "nodes": {
        "batch": {"type": "compression_batch"},
        "draft": {"type": "brief_draft"},
        "claim": {"type": "claimed_brief"},
    },
    "edges": chain(START, "batch", "draft", "claim"),
    "conditional_edges": [
        {"from": "claim", "condition": "compress_again",
         "routes": {"again": "batch", "default": END}},
    ],
}
