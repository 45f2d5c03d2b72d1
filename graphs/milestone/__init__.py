"""milestone: flag a turn of a session as a milestone (stenographer_mark_milestone).

validate → redact the label's secrets → store it → reply."""

from graphs.definition import channels, linear

DEFINITION = linear(
    "milestone",
    channels("request", "milestone", "reply"),
    validate="checked_milestone",
    redact="redacted_milestone",
    mark="marked_milestone",
)
