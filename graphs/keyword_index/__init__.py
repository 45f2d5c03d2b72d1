"""keyword_index_rebuild: write the derived keyword index again from the stored turns.

rebuild (every turn's entry, its context and date words computed as an ingest computes
them, in one snapshot; the queue up to then dropped; on PostgreSQL its index of the
turns' lexemes written again) → END.
"""

from graphs.definition import channels, linear

DEFINITION = linear(
    "keyword_index_rebuild",
    channels("request", "reply"),
    rebuild="rebuilt_keyword_index",
)
