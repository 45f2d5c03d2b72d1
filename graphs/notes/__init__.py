"""notes: the running notes of a session (stenographer_get_brief).

validate → milestones, NAFE reasoning-drift flags, briefs and recent live turns →
Markdown within the budget.
"""

from graphs.definition import END, SCHEMA_VERSION, START, chain, channels

DEFINITION = {
    "schema_version": SCHEMA_VERSION,
    "name": "notes",
    "channels": channels("request", "session", "session_row", "max_chars", "milestones",
                         "flags", "briefs", "live", "reply"),
    "nodes": {
        "validate": {"type": "checked_notes"},
        "evidence": {"type": "notes_evidence"},
        "reply": {"type": "notes_markdown"},
    },
    "edges": chain(START, "validate", "evidence", "reply", END),
}
