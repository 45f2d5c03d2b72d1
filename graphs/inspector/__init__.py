"""inspect_*: the read-only views of the browser inspector (stenographer.inspector).

inspect_sessions   validate the page → sessions by last activity, with counts → reply
inspect_notes      validate the session → the notes' evidence → the running notes and
                   the milestones, briefs and live turns they list
inspect_exchange   validate the id → one turn in full, its brief and neighbours
inspect_brief      validate the id → one brief with its source turns and hash checks
inspect_runs       validate the page → newest runs, without the inspector's own reads

Search and one run's trace are the shared graphs ``search`` and ``trace``. Each graph's
output is its ``reply`` channel.
"""

from graphs.definition import channels, linear

__all__ = ["BRIEF", "DEFINITIONS", "EXCHANGE", "INSPECTOR_READS", "NOTES", "RUNS", "SESSIONS"]

# Read-only graphs that only show stored data; the run list hides them by default so
# that browsing does not bury the runs being inspected. "runs" and
# "graphrag_community_list" are the names earlier versions gave two of these reads: their
# stored runs stay hidden too.
INSPECTOR_READS = ["inspect_sessions", "inspect_notes", "inspect_exchange", "inspect_brief",
                   "inspect_runs", "trace", "graphrag_community", "runs", "graphrag_community_list"]

SESSIONS = linear(
    "inspect_sessions",
    channels("request", "listing", "sessions", "total", "counts", "reply"),
    validate={"type": "checked_listing", "default_limit": 100},
    load="session_list",
    reply="sessions_text",
)

NOTES = linear(
    "inspect_notes",
    channels("request", "session", "session_row", "max_chars", "milestones", "flags",
             "briefs", "live", "reply"),
    validate="checked_notes",
    evidence="notes_evidence",
    reply="notes_view",
)

EXCHANGE = linear(
    "inspect_exchange",
    channels("request", "exchange_id", "reply"),
    validate="checked_exchange_ref",
    load="exchange_detail",
)

BRIEF = linear(
    "inspect_brief",
    channels("request", "brief_id", "reply"),
    validate="checked_brief_ref",
    load="brief_detail",
)

RUNS = linear(
    "inspect_runs",
    channels("request", "listing", "reply"),
    validate={"type": "checked_listing", "default_limit": 50},
    load={"type": "run_list", "hide": INSPECTOR_READS},
)

DEFINITIONS = [SESSIONS, NOTES, EXCHANGE, BRIEF, RUNS]
