"""trace: read stored stage traces — one run by id, or the recent runs.

validate (which: one run, or the list) → load one run's stages | list the recent runs;
either writes the reply.
"""

from graphs.definition import END, SCHEMA_VERSION, START, chain, channels

DEFINITION = {
    "schema_version": SCHEMA_VERSION,
    "name": "trace",
    "channels": channels("request", "wanted", "reply"),
    "nodes": {
        "validate": {"type": "checked_trace_request"},
        "load": {"type": "stored_trace"},
        "list": {"type": "recent_traces"},
    },
    "edges": chain(START, "validate") + chain("load", END) + chain("list", END),
    "conditional_edges": [
        {"from": "validate", "condition": "wanted", "routes": {"one": "load", "list": "list"}},
    ],
}
