"""recover: compress what a process killed between an ingest and its compression left.

the next session holding a full batch of uncompressed turns → note it → load its batch →
extract the brief → claim the turns; go again while the session still holds a full
batch, then on to the next such session, until there is none → reply (the sessions
compressed). A server runs it once at
start (``App.finish_compression``); ``sync_import`` and ``sync_pull`` run the same
stages (``graphs.compress.overdue_loop``) after applying turns.
"""

from graphs.compress import OVERDUE_CHANNELS, overdue_loop
from graphs.definition import END, SCHEMA_VERSION, START, chain, channels

__all__ = ["DEFINITION", "MAX_STEPS"]

# One pass per session and per brief; a store can hold many sessions left overdue.
MAX_STEPS = 10_000_000

_nodes, _edges, _routes = overdue_loop("reply", note="recovered_session")
DEFINITION = {
    "schema_version": SCHEMA_VERSION,
    "name": "recover",
    "channels": channels("request", *OVERDUE_CHANNELS, "reply", append=("recovered",)),
    "nodes": {**_nodes, "reply": {"type": "recovered_reply"}},
    "edges": chain(START, "overdue") + _edges + chain("reply", END),
    "conditional_edges": _routes,
}
