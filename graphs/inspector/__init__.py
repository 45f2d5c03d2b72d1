"""inspect_*: the read-only views of the browser inspector (stenographer.inspector).

inspect_sessions   validate the page → sessions by last activity, with counts
inspect_exchange   validate the id → one turn in full, its brief and neighbours
inspect_brief      validate the id → one brief with its source turns and hash checks
inspect_runs       validate the page → newest runs, without the inspector's own reads

Running notes, search and one run's trace are the shared graphs ``notes``, ``search``
and ``trace``.
"""

from graphs.definition import channels, linear

__all__ = ["BRIEF", "DEFINITIONS", "EXCHANGE", "INSPECTOR_READS", "RUNS", "SESSIONS"]

# Read-only graphs that only show stored data; the run list hides them by default so
# that browsing does not bury the runs being inspected. "runs" and
# "graphrag_community_list" are the names earlier versions gave two of these reads: their
# stored runs stay hidden too.
INSPECTOR_READS = ["inspect_sessions", "inspect_exchange", "inspect_brief", "inspect_runs",
                   "trace", "graphrag_community", "runs", "graphrag_community_list"]

SESSIONS = linear(
    "inspect_sessions",
    channels("request", "listing", "sessions", "total", "counts"),
    validate={"type": "checked_listing", "default_limit": 100},
    load="session_list",
)

EXCHANGE = linear(
    "inspect_exchange",
    channels("request", "exchange_id", "exchange"),
    validate="checked_exchange_ref",
    load="exchange_detail",
)

BRIEF = linear(
    "inspect_brief",
    channels("request", "brief_id", "brief"),
    validate="checked_brief_ref",
    load="brief_detail",
)

RUNS = linear(
    "inspect_runs",
    channels("request", "listing", "runs", "hidden_graphs"),
    validate={"type": "checked_listing", "default_limit": 50},
    load={"type": "run_list", "hide": INSPECTOR_READS},
)

DEFINITIONS = [SESSIONS, EXCHANGE, BRIEF, RUNS]
