"""keyword_index_rebuild: write the derived keyword index again from the stored turns.

rebuild (every turn's entry, its context and date words computed as an ingest computes
them, in one snapshot; the queue up to then dropped) → END. SQLite only: PostgreSQL
keeps its keyword index in the database.
"""

from graphs.definition import END, SCHEMA_VERSION, START, chain, channels

DEFINITION = {
    "schema_version": SCHEMA_VERSION,
    "name": "keyword_index_rebuild",
    "channels": channels("request", "reply"),
    "nodes": {"rebuild": {"type": "rebuilt_keyword_index"}},
    "edges": chain(START, "rebuild", END),
}
