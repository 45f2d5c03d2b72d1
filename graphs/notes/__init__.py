"""notes: the running notes of a session (stenographer_get_brief).

validate → milestones, NAFE reasoning-drift flags, briefs and recent live turns →
Markdown within the budget.
"""

from graphs.definition import channels, linear

DEFINITION = linear(
    "notes",
    channels("request", "session", "session_row", "max_chars", "milestones",
                         "flags", "briefs", "live", "reply"),
    validate="checked_notes",
    evidence="notes_evidence",
    reply="notes_markdown",
)
