"""stats: what the store holds and occupies (`stenographer stats`).

counts, file sizes, bytes per table (dbstat) and schema version → text.
"""

from graphs.definition import END, SCHEMA_VERSION, START, chain, channels

DEFINITION = {
    "schema_version": SCHEMA_VERSION,
    "name": "stats",
    "channels": channels("request", "stats", "text"),
    "nodes": {
        "load": {"type": "store_stats"},
        "reply": {"type": "stats_text"},
    },
    "edges": chain(START, "load", "reply", END),
}
