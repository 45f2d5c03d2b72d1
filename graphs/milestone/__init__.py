"""milestone: flag a turn of a session as a milestone (stenographer_mark_milestone).

validate → redact the label's secrets → store it → reply."""

from graphs.definition import END, SCHEMA_VERSION, START, chain, channels

DEFINITION = {
    "schema_version": SCHEMA_VERSION,
    "name": "milestone",
    "channels": channels("request", "milestone", "reply"),
    "nodes": {
        "validate": {"type": "checked_milestone"},
        "redact": {"type": "redacted_milestone"},
        "mark": {"type": "marked_milestone"},
    },
    "edges": chain(START, "validate", "redact", "mark", END),
}
