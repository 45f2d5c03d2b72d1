"""stats: what the store holds and occupies (`stenographer stats`).

counts, file sizes, bytes per table (dbstat) and schema version → reply (them and the text).
"""

from graphs.definition import channels, linear

DEFINITION = linear(
    "stats",
    channels("request", "stats", "reply"),
    load="store_stats",
    reply="stats_text",
)
